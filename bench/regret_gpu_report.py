"""The regret report of bench/regret_gpu.sh: per world size, the truth
(each choice timed alone, bench/regret_gpu.py --mode truth) beside each
tuner's decisions, and the regret t(winner) / t(best) - 1 per size.

    python3 bench/regret_gpu_report.py DIR      # DIR/w{2,4}/{truth,immediate,...}.json

Prints markdown; the truth is the CUDA-graph time (what a compiled graph's
collective costs on the GPU), the eager column beside it. A regret is taken
against the best of the choices the tuner was offered (the deferred path
has no op's default).
"""
import json
import os
import re
import statistics
import sys

MODES = ["immediate", "deferred", "pytorch", "vllm"]


def load(path: str):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def human(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def report_world(d: str, out: list) -> None:
    truth = load(os.path.join(d, "truth.json"))
    if truth is None:
        out.append(f"(no truth in {d})\n")
        return
    out.append(f"## {truth['world']} x {truth['device']}, bf16 all_reduce "
               f"(torch {truth['torch']}, {truth['date']})\n")
    times = truth["times"]
    sizes = sorted(int(s) for s in times)
    choices = list(next(iter(times.values())).keys())
    out.append("Truth: each choice alone, median us per call under a CUDA graph (eager in "
               "brackets), max over ranks.\n")
    out.append("| size | " + " | ".join(choices) + " | best |")
    out.append("| ---: | " + " | ".join("---:" for _ in choices) + " | --- |")
    for n in sizes:
        t = times[str(n)]
        best = min(choices, key=lambda c: t[c]["graph_us"])
        out.append(f"| {human(n)} | " + " | ".join(
            f"{t[c]['graph_us']:.1f} ({t[c]['eager_us']:.1f})" for c in choices) + f" | {best} |")
    out.append("")
    out.append("| tuner | " + " | ".join(human(n) for n in sizes) +
               " | regret max | regret mean | tuning wall (s) | per selection (s) |")
    out.append("| --- | " + " | ".join("---" for _ in sizes) + " | ---: | ---: | ---: | ---: |")
    for mode in MODES:
        r = load(os.path.join(d, f"{mode}.json"))
        if r is None:
            out.append(f"| {mode} | " + " | ".join("-" for _ in sizes) + " | not run | | | |")
            continue
        cells, regrets = [], []
        by_size = dict(zip(r.get("sizes", []), r.get("winners", [])))
        offered_by = dict(zip(r.get("sizes", []), r.get("reported_us", []))) \
            if mode == "deferred" else {}
        for n in sizes:
            w = by_size.get(n)
            t = times[str(n)]
            if w is None or w not in t:
                cells.append("?")
                continue
            # The best of the choices this tuner was offered (the deferred
            # path has no op's default).
            offered = [c for c in t if c in offered_by.get(n, t)]
            best = min(t[c]["graph_us"] for c in offered)
            regret = t[w]["graph_us"] / best - 1
            regrets.append(regret)
            cells.append(f"{w} {100 * regret:.1f}%")
        wall = r.get("tuning_wall_s", float("nan"))
        per = wall / max(1, r.get("selections", 1))
        mx = f"{100 * max(regrets):.1f}%" if regrets else "-"
        mean = f"{100 * statistics.mean(regrets):.1f}%" if regrets else "-"
        out.append(f"| {mode} | " + " | ".join(cells) +
                   f" | {mx} | {mean} | {wall:.2f} | {per:.2f} |")
    out.append("")
    check = load(os.path.join(d, "check.json"))
    if check:
        out.append("The output check, 1 MiB per rank of randn data (one round per dtype):")
        for dtype, c in check["check"].items():
            wrong_passed = [n for n in c["passed"] if n.startswith("wrong_")]
            right = [n for n in c["ruled_out"] if not n.startswith("wrong_")]
            # A correct choice that raised (no kernel for the dtype) never
            # reached the output check.
            raised = [n for n in right if "output differs" not in c["ruled_out"][n]]
            right_out = [n for n in right if n not in raised]
            out.append(f"- {dtype}: {c['status']}; passed {', '.join(c['passed'])}; ruled out "
                       f"{', '.join(c['ruled_out'])}; correct ones ruled out by the output "
                       f"check: {right_out or 'none'}; correct ones that did not run: "
                       f"{raised or 'none'}; wrong ones passed: {wrong_passed or 'none'}")
            for name in right:
                out.append(f"  - {name}: {c['ruled_out'][name]}")
        out.append("")
    for mode in MODES:
        r = load(os.path.join(d, f"{mode}.json"))
        if r and r.get("reported_us"):
            out.append(f"{mode}: what the tuner reported (us) per size, against the truth (graph):")
            for n, rep, st in zip(r["sizes"], r["reported_us"],
                                  r.get("status", [""] * len(r["sizes"]))):
                t = times[str(n)]
                shown = ", ".join(f"{c} {v:.1f} ({v / t[c]['graph_us']:.2f}x)" if c in t
                                  else f"{c} {v:.1f}" for c, v in rep.items())
                agree = ""
                if "all_reduce/nccl" in rep and "nccl" in rep and rep["nccl"] > 0:
                    agree = (f"; daemon's NCCL over the ranks' NCCL: "
                             f"{rep['all_reduce/nccl'] / rep['nccl']:.3f}")
                out.append(f"- {human(n)}: {shown} {st}{agree}")
            out.append("")
        if r and r.get("nccl_agreement"):
            out.append("The daemon's own NCCL (all_reduce/nccl, its worker's graph timing) "
                       "beside the same ncclAllReduce called by the ranks (nccl_direct.py) "
                       "and an in-place torch.distributed all_reduce, one round per size "
                       "(us; ratios daemon / ranks):")
            out.append("")
            out.append("| size | daemon | ranks, ncclAllReduce | ratio | ranks, torch in place | ratio |")
            out.append("| ---: | ---: | ---: | ---: | ---: | ---: |")

            def cell(d, k):
                return (f"{k:.2f} | {d / k:.3f}" if d and k else "- | -")
            for a in r["nccl_agreement"]:
                d = a.get("daemon_us")
                out.append(f"| {human(a['bytes'])} | {d:.2f} | {cell(d, a.get('direct_us'))} | "
                           f"{cell(d, a.get('ranks_us'))} |" if d else
                           f"| {human(a['bytes'])} | - | - | - | - | - |")
            out.append("")
        if r and r.get("table"):
            out.append(f"{mode} table:\n```\n{r['table']}\n```\n")


def report_main(doc: str, title: str, report_world) -> int:
    """main() of the GPU reports: report_world(folder, out) over every wN/
    folder of the one argument, by world size; prints the markdown."""
    if len(sys.argv) != 2:
        print(doc, file=sys.stderr)
        return 2
    root = sys.argv[1]
    out = [title] if title else []
    worlds = [w for w in os.listdir(root) if re.fullmatch(r"w\d+", w)
              and os.path.isdir(os.path.join(root, w))]
    for w in sorted(worlds, key=lambda w: int(w[1:])):
        report_world(os.path.join(root, w), out)
    print("\n".join(out))
    return 0


def main() -> int:
    return report_main(__doc__, "", report_world)


if __name__ == "__main__":
    sys.exit(main())
