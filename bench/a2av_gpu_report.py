"""Report of bench/a2av_gpu.sh: per split pattern, base and timing mode, the
median of NCCL's grouped send/recv and of the best P2P shape, and their
ratio (below 1: the P2P kernel is faster).

    python3 bench/a2av_gpu_report.py OUT WORLD
"""
import json
import pathlib
import sys


def ranked(answer):
    """The ranked candidates of one `autotunectl --json tune` answer."""
    if isinstance(answer, dict):
        if "ranked" in answer:
            return answer["ranked"]
        for v in answer.values():
            found = ranked(v)
            if found is not None:
                return found
    if isinstance(answer, list):
        for v in answer:
            found = ranked(v)
            if found is not None:
                return found
    return None


def main() -> int:
    out, world = pathlib.Path(sys.argv[1]), sys.argv[2]
    print(f"# all_to_all, uneven splits, {world} GPUs: all_to_all/p2p against all_to_all/nccl\n")
    print("| pattern | base (elements) | timing | nccl median us | best p2p median us "
          "| p2p / nccl | winner |")
    print("| --- | ---: | --- | ---: | ---: | ---: | --- |")
    at_or_below = total = 0
    for path in sorted(out.glob("*_*_*.json")):
        pattern, base, timing = path.stem.split("_", 2)
        try:
            answer = json.loads(path.read_text())
        except ValueError:
            print(f"| {pattern} | {base} | {timing} | no answer: "
                  f"{path.with_suffix('.err').read_text().strip()[-120:]} | | | |")
            continue
        rows = ranked(answer) or []
        nccl = [r["median_us"] for r in rows if r.get("ok") and
                r["candidate"]["impl"] == "all_to_all/nccl"]
        p2p = [r["median_us"] for r in rows if r.get("ok") and
               r["candidate"]["impl"] == "all_to_all/p2p"]
        bad = [f'{r["candidate"]["impl"]}: {r.get("reason", "")}' for r in rows if not r.get("ok")]
        winner = answer.get("winner") or (rows[0]["candidate"]["impl"] if rows else "-")
        if nccl and p2p:
            ratio = min(p2p) / nccl[0]
            total += 1
            at_or_below += ratio <= 1.0
            print(f"| {pattern} | {base} | {timing} | {nccl[0]:.1f} | {min(p2p):.1f} | "
                  f"{ratio:.3f} | {winner} |")
        else:
            print(f"| {pattern} | {base} | {timing} | {nccl[0] if nccl else '-'} | "
                  f"{min(p2p) if p2p else '-'} | - | {'; '.join(bad)[:160]} |")
    print(f"\nP2P at or below NCCL: {at_or_below} of {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
