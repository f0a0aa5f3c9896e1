"""The regret of the daemon's own sweep (bench/regret_gpu.sh):

    regret_sweep.py alone CTL SOCKET SWEEP.jsonl OUT.jsonl [TUNE ARGS...]
        tunes each working candidate of every size of the sweep alone (one
        autotunectl tune per candidate and size: a round of its own), in
        the sweep's order, rotated per size; one JSON line per tune
    regret_sweep.py report SWEEP.jsonl ALONE.jsonl WORLD
        per size: the sweep's winner, the best alone, the regret
        t_alone(winner) / min t_alone - 1; markdown on stdout
"""
import json
import statistics
import subprocess
import sys


def field(d: dict, name: str, default=None):
    """d[name], as autotunectl --json spells it (proto field names) or in
    lowerCamelCase."""
    if name in d:
        return d[name]
    head, *rest = name.split("_")
    return d.get(head + "".join(w.title() for w in rest), default)


def spec(c: dict) -> str:
    cand = c["candidate"]
    params = cand.get("params") or {}
    return cand["impl"] + (":" + ",".join(f"{k}={v}" for k, v in sorted(params.items()))
                           if params else "")


def sizes(path: str) -> list:
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                u = json.loads(line)
                r = field(u, "size_result")
                if r is not None:
                    out.append(r)
    return out


def alone(ctl: str, socket: str, sweep: str, dest: str, args: list) -> int:
    with open(dest, "w") as f:
        for i, r in enumerate(sizes(sweep)):
            ok = [spec(c) for c in r.get("ranked", []) if c.get("ok")]
            ok = ok[i % len(ok):] + ok[:i % len(ok)] if ok else ok
            nbytes = int(r["bytes"])
            for s in ok:
                p = subprocess.run([ctl, f"--socket={socket}", "--json", "tune", *args,
                                    f"--bytes={nbytes}", f"--candidates={s}"],
                                   capture_output=True, text=True, timeout=120)
                median = None
                try:
                    answer = json.loads(p.stdout)
                    res = answer["results"][0]
                    if res["ranked"][0].get("ok"):
                        median = float(field(res["ranked"][0], "median_us"))
                except (ValueError, KeyError, IndexError):
                    pass
                f.write(json.dumps({"bytes": nbytes, "spec": s, "median_us": median,
                                    "error": p.stderr.strip()[-300:] if median is None else ""})
                        + "\n")
                f.flush()
    return 0


def report(sweep: str, alone_path: str, world: str) -> int:
    truth: dict = {}
    with open(alone_path) as f:
        for line in f:
            a = json.loads(line)
            if a["median_us"] is not None:
                truth.setdefault(a["bytes"], {})[a["spec"]] = a["median_us"]
    print(f"## The daemon's own sweep, {world} GPUs: all_reduce bf16, CUDA graphs\n")
    print("Truth: each candidate of the sweep tuned alone (a round of its own, fresh daemon).\n")
    print("| size | sweep winner | its time alone (us) | best alone | best (us) | regret | "
          "sweep's verdict |")
    print("| ---: | --- | ---: | --- | ---: | ---: | --- |")
    regrets = []
    for r in sizes(sweep):
        n = int(r["bytes"])
        t = truth.get(n, {})
        w = r.get("winner", "")
        ws = next((spec(c) for c in r.get("ranked", []) if c.get("ok")), w)
        if not t or ws not in t:
            print(f"| {n} | {ws} | ? | | | | {r.get('confidence', '')} |")
            continue
        best = min(t, key=t.get)
        regret = t[ws] / t[best] - 1
        regrets.append(regret)
        print(f"| {n} | {ws} | {t[ws]:.2f} | {best} | {t[best]:.2f} | {100 * regret:.1f}% | "
              f"{r.get('confidence', '')} |")
    if regrets:
        print(f"\nregret max {100 * max(regrets):.1f}%, mean {100 * statistics.mean(regrets):.1f}%"
              f" over {len(regrets)} sizes\n")
    return 0


def main() -> int:
    if sys.argv[1] == "alone":
        return alone(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:])
    return report(sys.argv[2], sys.argv[3], sys.argv[4])


if __name__ == "__main__":
    sys.exit(main())
