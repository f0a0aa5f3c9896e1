"""Report of bench/nccl_agreement_gpu.sh: per size, NCCL's bf16 all_reduce
under CUDA graphs as the daemon times it in one process (one.jsonl), across
two daemons of one GPU each (cross.txt, rank 0's answers), as the rank
processes time it as a caller candidate (bench/nccl_caller.py's tables:
torch.distributed's all_reduce in place, caller.jsonl, and the table's
all_reduce/nccl, a copy then the same call, caller_copy.jsonl) and as torch_collectives.py
times it (torch_graph.json), with each daemon figure's ratio to the caller
candidate's in place.

    python3 bench/nccl_agreement_report.py OUT
"""
import pathlib
import re
import sys

from combine_gpu import parse_daemon_lines
from vllm_table_report import read_table, torch_figures

ROUND = re.compile(r"^rank 0 \(.*count (\d+),")
NCCL = re.compile(r"^\s+all_reduce/nccl\s+median\s+([0-9.]+) us")


def one_process(path: pathlib.Path) -> dict[int, float]:
    """{bytes: median us} of all_reduce/nccl in the one-daemon sweep."""
    sizes = parse_daemon_lines(path.read_text().splitlines())["sizes"].get("all_reduce", {})
    out: dict[int, float] = {}
    for nbytes, entry in sizes.items():
        for label, c in entry["candidates"].items():
            if label.split(":")[0] == "nccl" and c["ok"]:
                out[nbytes] = c["median_us"]
    return out


def two_daemons(path: pathlib.Path) -> dict[int, float]:
    """{bytes: median us} of all_reduce/nccl in rank 0's cross-daemon answers
    (the last answer of a count wins: the CACHED repeat is the same)."""
    out: dict[int, float] = {}
    count = None
    for line in path.read_text().splitlines():
        m = ROUND.match(line)
        if m:
            count = int(m.group(1))
            continue
        m = NCCL.match(line)
        if m and count is not None:
            out[count * 2] = float(m.group(1))
            count = None
    return out


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    one = one_process(out / "one.jsonl") if (out / "one.jsonl").exists() else {}
    cross = two_daemons(out / "cross.txt") if (out / "cross.txt").exists() else {}
    def caller_figures(name: str, stem: str) -> dict[int, float]:
        path = out / f"{stem}.jsonl"
        table = read_table(str(path))[0] if path.exists() else {}
        return {b: us for b, (us, _) in table.get(name, {}).items()}

    caller = caller_figures("nccl_in_place", "caller")
    copied = caller_figures("all_reduce/nccl", "caller_copy")
    torch = (torch_figures(str(out / "torch_graph.json")).get("all_reduce/nccl", {})
             if (out / "torch_graph.json").exists() else {})
    print("# NCCL all_reduce bf16 under CUDA graphs on 2 GPUs: the daemon's against "
          "the caller candidate's\n")
    print("| bytes | one daemon, one process (us) | two daemons, one GPU each (us) "
          "| caller candidate in place, timed in the ranks (us) "
          "| the table's all_reduce/nccl, copy + call (us) | torch_collectives.py (us) "
          "| one / caller | two / caller |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for b in sorted(set(one) | set(cross) | set(caller) | set(torch)):
        c = caller.get(b)
        cells = [f"{d[b]:.1f}" if b in d else "-" for d in (one, cross, caller, copied, torch)]
        ratios = [f"{d[b] / c:.3f}" if b in d and c else "-" for d in (one, cross)]
        print(f"| {b} | {' | '.join(cells)} | {' | '.join(ratios)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
