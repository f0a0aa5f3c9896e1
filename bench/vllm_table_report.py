"""The vLLM helper's table (examples/vllm_worker.py --save PREFIX) beside
bench/torch_collectives.py's figures of the same run: per size, the table's
all_reduce/nccl (timed in the ranks) against torch's NCCL, and the table's
winner against the best of torch's NCCL and symm-mem one-shot / two-shot;
then the table's ranges checked: at every size inside a range, is the
range's candidate measurably slower than another candidate there (the 99 %
intervals of the answer, autotuned.merge.slower_picks; needs PYTHONPATH to
reach client/python)?

    python3 bench/vllm_table_report.py PREFIX.jsonl [torch_graph.json]
"""
import json
import sys

from combine_gpu import parse_torch


def read_table(table: str) -> tuple[dict[str, dict[int, tuple[float, str]]],
                                    dict[int, tuple[float, str]]]:
    """({candidate: {bytes: (median us, timed_by)}} of the candidates that
    ran, a caller's by its name, the daemon's by its spec; {bytes: (the
    winner's median us, its name)}) from the helper's saved answers (bf16)."""
    figures: dict[str, dict[int, tuple[float, str]]] = {}
    winner: dict[int, tuple[float, str]] = {}
    with open(table) as f:
        for line in f:
            answer = json.loads(line) if line.strip() else {}
            size = answer.get("size_result")
            if not size or not size.get("ranked"):
                continue
            nbytes = int(size["problem"]["count"]) * 2  # bf16
            for r in size["ranked"]:
                c = r["candidate"]
                name = c.get("client", {}).get("name") or c.get("impl")
                if name and r.get("ok"):
                    figures.setdefault(name, {})[nbytes] = (r["median_us"], r.get("timed_by", ""))
            top = size["ranked"][0]
            name = top["candidate"].get("impl") or top["candidate"]["client"]["name"]
            winner[nbytes] = (top["median_us"], name)
    return figures, winner


def torch_figures(path: str) -> dict[str, dict[int, float]]:
    """{op: {bytes: us}} of torch_collectives.py's JSON, the ops that ran."""
    with open(path) as f:
        ops = parse_torch(json.load(f))["ops"]
    return {op: {b: r["us"] for b, r in sizes.items() if r["ok"]} for op, sizes in ops.items()}


def slower_in_ranges(table: str) -> list[str]:
    """One line per size whose range's candidate is measurably slower than
    another candidate at that size; [] when none is."""
    from google.protobuf import json_format

    from autotuned import merge, pb

    results, ranges = [], []
    with open(table) as f:
        for line in f:
            answer = json.loads(line) if line.strip() else {}
            if answer.get("size_result"):
                results.append(json_format.ParseDict(answer["size_result"], pb.ProblemResult(),
                                                     ignore_unknown_fields=True))
            ranges = answer.get("table", {}).get("ranges", ranges)
    picks = []
    for r in results:
        count = r.problem.count
        inside = [g for g in ranges if int(g["min_count"]) <= count <= int(g["max_count"])]
        picks.append(int(inside[0].get("winner_index", -1)) if inside else -1)
    return [f"count {results[k].problem.count}: the range's candidate "
            f"{picks[k]} is measurably slower than another there"
            for k in merge.slower_picks(results, picks)]


def ranges_check(table: str) -> int:
    """Prints the check; the number of sizes that fail it."""
    slower = slower_in_ranges(table)
    print(f"\nRanges whose candidate is measurably slower than another at a size "
          f"inside them: {len(slower) or 'none'}")
    for line in slower:
        print(f"- {line}")
    return len(slower)


def main() -> int:
    """Exit status 1 when a range fails the check."""
    table = sys.argv[1]
    if len(sys.argv) < 3:
        return 1 if ranges_check(table) else 0
    torch_file = sys.argv[2]
    figures, winner = read_table(table)
    nccl = figures.get("all_reduce/nccl", {})
    torch = torch_figures(torch_file)
    print("| bytes | table's all_reduce/nccl us (timed by) | torch NCCL us | ratio "
          "| table winner us | torch best us | winner / torch best |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for b in sorted(winner):
        peers = [torch[op][b] for op in ("all_reduce/nccl", "all_reduce/symm_one_shot",
                                         "all_reduce/symm_two_shot") if b in torch.get(op, {})]
        t_nccl = torch.get("all_reduce/nccl", {}).get(b)
        n, how = nccl.get(b, (float("nan"), "-"))
        ratio = f"{n / t_nccl:.3f}" if t_nccl else "-"
        best = min(peers) if peers else float("nan")
        print(f"| {b} | {n:.1f} ({how}) | {t_nccl if t_nccl is None else round(t_nccl, 1)} "
              f"| {ratio} | {winner[b][0]:.1f} | {best:.1f} | {winner[b][0] / best:.3f} |")
    return 1 if ranges_check(table) else 0


if __name__ == "__main__":
    sys.exit(main())
