"""The report of bench/tp_layers_gpu.sh: per world size, the compiled
tensor-parallel stack's step time with autotuned's Inductor integration off
and on, under a CUDA graph and eagerly, side by side.

    python3 bench/tp_layers_gpu_report.py DIR   # DIR/w{2,4}/off_R.json, on_*_R.json

"on" under CUDA graphs is the runs that decided by GPU time
(on_cuda_graph_R), eagerly the runs that decided by eager time
(on_event_loop_R): each as a user would set it up for how the graph runs
(a folder of on_R.json runs is read as one set for both). A column holds
the fastest of a mode's runs (each a fresh process); a
spread is (slowest - fastest) / fastest over them. "on / off" beyond the
larger spread is a difference the runs can tell; inside it, they cannot.
Below each table: the decisions of every "on" run (selection, winner,
status), whether the ranks agreed, and the largest output difference from
the uncompiled model.
"""
import os
import re
import sys
from collections import Counter

from regret_gpu_report import load, report_main  # the same JSON files, one folder per world

# A relative difference from the uncompiled model beyond bf16's rounding
# over 4 layers (the runs without autotuned read about 2e-2).
WRONG = 0.1


def runs_of(path: str, mode: str) -> list:
    names = [f for f in os.listdir(path) if re.fullmatch(rf"{mode}_\d+\.json", f)]
    names.sort(key=lambda f: int(f.rsplit("_", 1)[1].split(".")[0]))
    return [(n, load(os.path.join(path, n))) for n in names]


def best(runs: list, tokens: str, kind: str):
    vals = [r["sizes"][tokens][kind] for _, r in runs
            if r and tokens in r.get("sizes", {}) and r["sizes"][tokens].get(kind, -1) > 0]
    if not vals:
        return None, None
    lo = min(vals)
    return lo, ((max(vals) - lo) / lo if len(vals) > 1 else None)


def pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def us(x) -> str:
    return "-" if x is None else (f"{x:.1f}" if x < 1000 else f"{x:.0f}")


def report_world(path: str, out: list) -> None:
    off = runs_of(path, "off")
    on_by_kind = {"graph_us": runs_of(path, "on_cuda_graph") or runs_of(path, "on"),
                  "eager_us": runs_of(path, "on_event_loop") or runs_of(path, "on")}
    on = {n: r for kind in on_by_kind.values() for n, r in kind}
    on = sorted(on.items())
    first = next((r for _, r in off + on if r), None)
    if first is None:
        out.append(f"(no results in {path})\n")
        return
    model = ("DTensor (parallelize_module)" if first.get("model") == "dtensor"
             else "plain functional collectives")
    out.append(f"## {first['world']} x {first['device']}: {first['layers']} layers ({model}), hidden "
               f"{first['hidden']}, bf16 (torch {first['torch']}, {first['date']})\n")
    out.append(f"Step time in us, max over ranks; graph: median replay of a CUDA graph of "
               f"{first['calls']} steps / {first['calls']}; eager: median of {first['reps']} "
               f"blocks of {first['calls']} back-to-back steps. all_reduce message: tokens x "
               f"hidden x 2 bytes. Runs: off {len(off)}, on (graph) "
               f"{len(on_by_kind['graph_us'])}, on (eager) {len(on_by_kind['eager_us'])}.\n")
    backends = sorted({r.get("ops_backend") or "not recorded" for _, r in on if r})
    out.append(f"torch.ops.autotuned backend of the on runs: {', '.join(backends) or 'none'} "
               "(cpp: libautotuned_torch_ops.so; python: the Python custom ops).\n")
    sizes = sorted({t for _, r in off + on if r for t in r.get("sizes", {})}, key=int)
    for kind, label in (("graph_us", "CUDA graph"), ("eager_us", "eager")):
        out.append(f"### {label}\n")
        out.append("| tokens | message | off | on | on / off | spread off | spread on |")
        out.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        slower, faster = [], []
        for t in sizes:
            a, sa = best(off, t, kind)
            b, sb = best(on_by_kind[kind], t, kind)
            ratio = b / a if a and b else None
            if ratio is not None and sa is not None and sb is not None:
                s = max(sa, sb)
                if ratio > 1 + s:
                    slower.append(f"{t} ({ratio:.3f})")
                elif 1 / ratio > 1 + s:
                    faster.append(f"{t} ({ratio:.3f})")
            msg = int(t) * first["hidden"] * 2
            msg_text = f"{msg >> 20} MiB" if msg >= 1 << 20 else f"{msg >> 10} KiB"
            out.append(f"| {t} | {msg_text} | {us(a)} | {us(b)} | "
                       f"{'-' if ratio is None else f'{ratio:.3f}'} | {pct(sa)} | {pct(sb)} |")
        out.append("")
        out.append(f"on slower than off beyond the spread: {', '.join(slower) or 'none'}; "
                   f"faster beyond the spread: {', '.join(faster) or 'none'}\n")
    diffs = [r["sizes"][t]["max_rel_diff"] for _, r in off + on if r for t in r["sizes"]]
    if diffs:
        out.append(f"Largest output difference from the uncompiled model (relative to the "
                   f"output's largest magnitude), any run and size: {max(diffs):.2e}\n")
    wrong = [f"{n} tokens {t} ({r['sizes'][t]['max_rel_diff']:.2e})" for n, r in off + on if r
             for t in r["sizes"] if r["sizes"][t]["max_rel_diff"] > WRONG]
    out.append(f"Outputs beyond {WRONG} of it (wrong, not bf16 rounding): "
               f"{', '.join(wrong) or 'none'}\n")
    for name, r in on:
        if not r:
            out.append(f"- {name}: no result")
            continue
        decisions = r.get("decisions", [])
        statuses = Counter(d[3] for d in decisions)
        winners = Counter(f"{d[0].split(':')[0]} -> {d[2]}" for d in decisions)
        out.append(f"- {name}: {len(decisions)} decisions ("
                   + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
                   + f"), ranks agree: {r.get('same_decisions')}; "
                   + "; ".join(f"{k} x{v}" for k, v in sorted(winners.items())))
    out.append("")


def main() -> int:
    return report_main(__doc__, "# Tensor-parallel layers: "
                       "autotuned off and on\n", report_world)


if __name__ == "__main__":
    sys.exit(main())
