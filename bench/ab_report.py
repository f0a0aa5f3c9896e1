"""A against B: the daemon's all_reduce sweeps of one build or setting (A)
beside another's (B), per timing mode and size, with PyTorch's best in the
same session, as a Markdown report:

  python3 bench/ab_report.py --a A_SWEEPS... --b B_SWEEPS... \\
      [--names off on] [--torch torch.json] [--torch_graph torch_graph.json]

A_SWEEPS / B_SWEEPS: `autotunectl --json sweep` outputs (JSON lines), any
number of each (repeats, size ranges, both timing modes); a file's timing
mode is its candidates' `timed_by`. Per side, mode, size and
implementation, the figure is the lowest median over the side's files and
the implementation's launch shapes (each repeat measured alike, so the
lowest is each side's best run). torch.json / torch_graph.json:
bench/torch_collectives.py's output (event loop / --graph); "torch best"
is the lowest of its all_reduce ops at that size.
"""
import argparse
import json
import sys
from collections import defaultdict

MODES = ("EVENT_LOOP", "CUDA_GRAPH")


def load_sweeps(paths):
    """{mode: {bytes: {impl: lowest median us}}} over the files."""
    out = defaultdict(lambda: defaultdict(dict))
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                sr = json.loads(line).get("size_result")
                if not sr:
                    continue
                p = sr["problem"]
                if p.get("collective") != "ALL_REDUCE":
                    continue
                nbytes = int(p["count"]) * {"BFLOAT16": 2, "FLOAT16": 2}.get(p["dtype"], 4)
                for r in sr.get("ranked", []):
                    if not r.get("ok") or "median_us" not in r:
                        continue
                    mode = r.get("timed_by", "EVENT_LOOP")
                    impl = r["candidate"]["impl"].split("/", 1)[-1]
                    cell = out[mode][nbytes]
                    cell[impl] = min(cell.get(impl, float("inf")), r["median_us"])
    return out


def torch_best(path):
    """{bytes: lowest us of torch's all_reduce ops}."""
    if not path:
        return {}
    with open(path) as f:
        doc = json.load(f)
    best = {}
    for r in doc.get("results", []):
        if r.get("ok") and r.get("op", "").startswith("all_reduce/"):
            best[r["bytes"]] = min(best.get(r["bytes"], float("inf")), r["us"])
    return best


def size_name(nbytes):
    for unit, name in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if nbytes >= unit and nbytes % unit == 0:
            return f"{nbytes // unit} {name}"
    return f"{nbytes} B"


def report(a, b, names, torch):
    lines = []
    for mode in MODES:
        sizes = sorted(set(a.get(mode, {})) & set(b.get(mode, {})))
        if not sizes:
            continue
        tb = torch.get(mode, {})
        lines += [f"## {mode}", "",
                  f"| size | winner {names[0]} | winner {names[1]} | {names[1]} / {names[0]} "
                  f"| torch best | {names[0]} / torch | {names[1]} / torch "
                  f"| per implementation, {names[1]} / {names[0]} |",
                  "|---|---:|---:|---:|---:|---:|---:|---|"]
        for n in sizes:
            ca, cb = a[mode][n], b[mode][n]
            wa, wb = min(ca.values()), min(cb.values())
            t = tb.get(n)
            per = ", ".join(f"{i} {cb[i] / ca[i]:.3f}" for i in sorted(ca) if i in cb)
            tcols = (f"{t:.1f} | {wa / t:.3f} | {wb / t:.3f}" if t else "- | - | -")
            lines.append(f"| {size_name(n)} | {wa:.1f} | {wb:.1f} | {wb / wa:.3f} | {tcols} | {per} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--a", nargs="+", required=True)
    p.add_argument("--b", nargs="+", required=True)
    p.add_argument("--names", nargs=2, default=["A", "B"])
    p.add_argument("--torch", default="")
    p.add_argument("--torch_graph", default="")
    args = p.parse_args(argv)
    torch = {"EVENT_LOOP": torch_best(args.torch), "CUDA_GRAPH": torch_best(args.torch_graph)}
    text = report(load_sweeps(args.a), load_sweeps(args.b), args.names, torch)
    if not text:
        print("ab_report: no size measured in the same mode on both sides", file=sys.stderr)
        return 1
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
