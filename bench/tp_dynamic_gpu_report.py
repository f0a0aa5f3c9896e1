"""The report of bench/tp_dynamic_gpu.sh: per world size, the compiled
tensor-parallel stack with a dynamic token dimension, one graph called at
each token count, its all_reduces with a winner per size range ("ranges")
against one winner for every size ("single", tuned at the size hint), side
by side, with the winner each ran at each size.

    python3 bench/tp_dynamic_gpu_report.py DIR   # DIR/wW/{single,ranges}_R.json

A column holds the fastest of a mode's runs (each a fresh process); a
spread is (slowest - fastest) / fastest over them. "ranges / single"
beyond the larger spread is a difference the runs can tell; inside it,
they cannot. "ran": the winners the graph's all_reduce sites ran at that
size (every run's, where runs differ). Below each table: the graphs each run
compiled (1: every size ran the one dynamic graph), the decisions' statuses,
whether the ranks agreed, the dispatch table, and outputs beyond bf16
rounding.
"""
import sys
from collections import Counter

from regret_gpu_report import human, report_main
from tp_layers_gpu_report import WRONG, best, pct, runs_of, us


def ran(runs: list, tokens: str) -> str:
    seen = []
    for _, r in runs:
        got = " + ".join(r["sizes"].get(tokens, {}).get("ran", [])) if r else ""
        if got and got not in seen:
            seen.append(got)
    return " / ".join(seen) or "-"


def ratio_row(a, sa, b, sb, tokens: str, slower: list, faster: list) -> str:
    """b / a as text, and `tokens` noted in `slower` or `faster` where the
    ratio is beyond the larger spread."""
    if not a or not b:
        return "-"
    r = b / a
    if sa is not None and sb is not None:
        s = max(sa, sb)
        if r > 1 + s:
            slower.append(f"{tokens} ({r:.3f})")
        elif 1 / r > 1 + s:
            faster.append(f"{tokens} ({r:.3f})")
    return f"{r:.3f}"


def report_world(path: str, out: list) -> None:
    modes = {m: runs_of(path, m) for m in ("single", "ranges")}
    every = modes["single"] + modes["ranges"]
    first = next((r for _, r in every if r), None)
    if first is None:
        out.append(f"(no results in {path})\n")
        return
    sizes = sorted({t for _, r in every if r for t in r.get("sizes", {})}, key=int)
    hint = next((next(iter(r["sizes"])) for _, r in every if r and r.get("sizes")), "-")
    points = next((r.get("split_points") for _, r in modes["ranges"] if r), None)
    ranged = f"split points {points}" if points != [] else \
        "no split points given (the integration's probe ladder)"
    out.append(f"## {first['world']} x {first['device']}: {first['layers']} layers, hidden "
               f"{first['hidden']}, bf16, one graph with a dynamic token dimension (torch "
               f"{first['torch']}, {first['date']})\n")
    out.append(f"Step time in us, max over ranks; graph: median replay of a CUDA graph of "
               f"{first['calls']} steps / {first['calls']}; eager: median of {first['reps']} "
               f"blocks of {first['calls']} back-to-back steps. single: one winner, tuned at "
               f"the size hint ({hint} tokens); ranges: {ranged}. Runs: single "
               f"{len(modes['single'])}, ranges {len(modes['ranges'])}.\n")
    out.append("| tokens | message | graph single | graph ranges | ranges / single | "
               "eager single | eager ranges | ranges / single | spread (graph) | "
               "ran (single) | ran (ranges) |")
    out.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    verdicts = {"graph_us": ([], []), "eager_us": ([], [])}
    for t in sizes:
        cells = []
        spreads = []
        for kind in ("graph_us", "eager_us"):
            a, sa = best(modes["single"], t, kind)
            b, sb = best(modes["ranges"], t, kind)
            cells += [us(a), us(b), ratio_row(a, sa, b, sb, t, *verdicts[kind])]
            if kind == "graph_us":
                spreads = [pct(sa), pct(sb)]
        out.append(f"| {t} | {human(int(t) * first['hidden'] * 2)} | " + " | ".join(cells)
                   + f" | {' / '.join(spreads)} | {ran(modes['single'], t)} | "
                   f"{ran(modes['ranges'], t)} |")
    out.append("")
    for kind, label in (("graph_us", "CUDA graph"), ("eager_us", "eager")):
        slower, faster = verdicts[kind]
        out.append(f"{label}: ranges slower than single beyond the spread: "
                   f"{', '.join(slower) or 'none'}; faster beyond the spread: "
                   f"{', '.join(faster) or 'none'}\n")
    wrong = [f"{n} tokens {t} ({r['sizes'][t]['max_rel_diff']:.2e})" for n, r in every if r
             for t in r["sizes"] if r["sizes"][t]["max_rel_diff"] > WRONG]
    out.append(f"Outputs beyond {WRONG} of the uncompiled model's largest magnitude (wrong, "
               f"not bf16 rounding): {', '.join(wrong) or 'none'}\n")
    for name, r in sorted(every, key=lambda x: x[0]):
        if not r:
            out.append(f"- {name}: no result")
            continue
        statuses = Counter(d[3] for d in r.get("decisions", []))
        tables = Counter(
            ", ".join(f"[{a}, {'inf' if b is None else b}] {w}" for a, b, w in table)
            for _, table in r.get("dispatches", []))
        out.append(f"- {name}: {r.get('graphs')} graph(s) compiled; "
                   + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
                   + f"; ranks agree: {r.get('same_decisions')}"
                   + "".join(f"; dispatch x{v}: {k}" for k, v in sorted(tables.items())))
    out.append("")


def main() -> int:
    return report_main(__doc__, "# Tensor-parallel layers, one dynamic graph: a winner per "
                       "size range against one winner\n", report_world)


if __name__ == "__main__":
    sys.exit(main())
