"""The report of bench/nccl_tuner_gpu.sh: per world size and collective, NCCL's
own choices beside the same calls steered by autotuned's tuner plugin, the
best of the forced algorithm and protocol combinations, and the table row the
plugin used.

    python3 bench/nccl_tuner_gpu_report.py DIR   # DIR/w{2,4}/nccl_R.json, ...

Prints markdown: a table per collective with the CUDA-graph figures (us per
call, max over ranks), then the same with the eager figures. The plugin's
graph figures come from the runs with the table tuned under CUDA graphs
(plugin_cuda_graph_R.json, nccl_tuner.cuda_graph.table), its eager figures
from the runs with the table tuned eagerly (plugin_event_loop_R.json,
nccl_tuner.event_loop.table); a folder of one table for both
(plugin_R.json, nccl_tuner.table) is read as that. nccl and each plugin
table ran R times, alternating, each in a fresh process; a column holds the
fastest of its runs, and a mode's spread is (slowest - fastest) / fastest
over its runs. The plugin is slower (faster) than NCCL beyond the
spread at a size where plugin / nccl exceeds 1 + s (nccl / plugin does),
s the larger of the two modes' spreads there; sizes where the plugin steered
nothing (no table row, or a default one, and NCCL's logged choice the same
with and without it) are listed apart: there the two runs differ by process
alone.
"""
import os
import re
import sys

from regret_gpu_report import human, load, report_main  # the same JSON files and sizes

COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter"]
FORCED = ["ring_ll", "ring_ll128", "ring_simple", "tree_ll", "tree_ll128", "tree_simple"]
# The plugin's runs per kind of figure: (run prefix, table file, probe log),
# the first whose runs exist.
PLUGIN_RUNS = {
    "graph_us": [("plugin_cuda_graph", "nccl_tuner.cuda_graph.table", "probe_plugin_cuda_graph"),
                 ("plugin", "nccl_tuner.table", "probe_plugin")],
    "eager_us": [("plugin_event_loop", "nccl_tuner.event_loop.table", "probe_plugin_event_loop"),
                 ("plugin", "nccl_tuner.table", "probe_plugin")],
}
TABLE_MAGIC = "autotuned-nccl-table 1"
# NCCL's per-call line under NCCL_DEBUG_SUBSYS=TUNING (rank 0); its bytes are
# count * element size, count being all_gather's send count and
# reduce_scatter's receive count.
CALL_LINE = re.compile(r"NCCL INFO (AllReduce|AllGather|ReduceScatter): (\d+) Bytes -> "
                       r"Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}")
NCCL_FUNCS = {"AllReduce": "all_reduce", "AllGather": "all_gather",
              "ReduceScatter": "reduce_scatter"}
TUNER_LINE = re.compile(r"TUNER/Plugin|autotuned tuner")




def us(v) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 100 else f"{v:.1f}"


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def nccl_bytes(collective: str, nbytes: int, world: int) -> int:
    """NCCL's nBytes for a call on nbytes of each rank's input: the larger of
    a rank's send and receive bytes (all_gather's output is world times its
    input; reduce_scatter's input is world times its output)."""
    return nbytes * world if collective == "all_gather" else nbytes


def logged_bytes(collective: str, nbytes: int, world: int) -> int:
    """The bytes NCCL's per-call TUNING line shows for the same call."""
    return nbytes // world if collective == "reduce_scatter" else nbytes


def read_table(path: str):
    """(identity, rows, error): rows as dicts, error a string or None."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        return None, [], f"no table: {e}"
    if not lines or lines[0].strip() != TABLE_MAGIC:
        return None, [], f"{path}: the first line is not '{TABLE_MAGIC}'"
    identity, rows = None, []
    for i, line in enumerate(lines[1:], start=2):
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        if f[0] == "identity" and len(f) == 2:
            identity = f[1]
            continue
        if len(f) != 8:
            return identity, [], f"{path}:{i}: {len(f)} fields, expected 8"
        try:
            rows.append({"collective": f[0], "nranks": int(f[1]), "nnodes": int(f[2]),
                         "min": int(f[3]), "max": int(f[4]), "algo": f[5], "proto": f[6],
                         "channels": int(f[7])})
        except ValueError:
            return identity, [], f"{path}:{i}: not a number where one belongs"
    return identity, rows, None


def table_row(rows: list, collective: str, world: int, nbytes: int):
    for r in rows:
        if (r["collective"] == collective and r["nranks"] == world and r["nnodes"] == 1
                and r["min"] <= nbytes <= r["max"]):
            return r
    return None


def row_text(r) -> str:
    return f"{r['algo']}/{r['proto']}/{r['channels']}" if r else "-"


def read_log(path: str):
    """(NCCL's per-call choices {(collective, bytes): "algo/proto/channels"},
    the distinct tuner lines) of one step's output."""
    choices: dict = {}
    tuner: list = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = CALL_LINE.search(line)
                if m:
                    key = (NCCL_FUNCS[m.group(1)], int(m.group(2)))
                    choices.setdefault(key, f"{m.group(3).lower()}/{m.group(4).lower()}/"
                                            f"{int(m.group(6)) - int(m.group(5)) + 1}")
                elif TUNER_LINE.search(line):
                    text = line.split("NCCL INFO", 1)[-1].strip()
                    if text not in tuner:
                        tuner.append(text)
    except OSError:
        pass
    return choices, tuner


def cell(run, collective: str, n: int):
    """The cell of a run's JSON, or None."""
    if run is None:
        return None
    return run.get("times", {}).get(collective, {}).get(str(n))


def figure(run, collective: str, n: int, kind: str):
    c = cell(run, collective, n)
    if c is None:
        return None
    v = c.get(kind)
    return v if isinstance(v, (int, float)) and v >= 0 else None


def best_of(runs: list, collective: str, n: int, kind: str):
    """(the fastest of the runs, the spread or None where fewer than two)."""
    vals = [v for v in (figure(r, collective, n, kind) for r in runs) if v is not None]
    if not vals:
        return None, None
    best = min(vals)
    spread = (max(vals) - best) / best if len(vals) >= 2 and best > 0 else None
    return best, spread


def steered_check(plugin_choice: str, row) -> bool:
    """The plugin run's logged choice is the table row's (its channel count
    only where the row sets one)."""
    if row is None or row["algo"] == "default":
        return True
    algo, proto, channels = plugin_choice.split("/")
    if (algo, proto) != (row["algo"], row["proto"]):
        return False
    return row["channels"] == 0 or int(channels) == row["channels"]


def collective_table(d: dict, collective: str, kind: str, out: list) -> None:
    world, sizes = d["world"], d["sizes"]
    p = d["plugin"][kind]
    out.append(f"### {collective}, {'CUDA graph' if kind == 'graph_us' else 'eager'}\n")
    out.append("| size | NCCL bytes | calls | nccl | plugin | plugin / nccl | spread nccl | "
               "spread plugin | best forced | table row | NCCL's choice | with the plugin |")
    out.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | --- |")
    slower, faster, unknown, missing, not_steered = [], [], [], [], []
    # Sizes where the plugin changed nothing: no row (or a default one) and
    # NCCL's logged choice the same with it and without it. A graph replay
    # does not call the plugin at all, so a difference there is between
    # processes, not the plugin's.
    idle = []
    for n in sizes:
        nb = nccl_bytes(collective, n, world)
        lb = logged_bytes(collective, n, world)
        a, sa = best_of(d["nccl"], collective, n, kind)
        b, sb = best_of(p["runs"], collective, n, kind)
        forced = [(figure(d["forced"][m], collective, n, kind), m) for m in FORCED]
        forced = [(v, m) for v, m in forced if v is not None]
        best = f"{min(forced)[1]} {us(min(forced)[0])}" if forced else "-"
        row = table_row(p["rows"], collective, world, nb)
        nccl_choice = d["probe_nccl"].get((collective, lb), "-")
        plugin_choice = p["probe"].get((collective, lb), "-")
        if plugin_choice != "-" and not steered_check(plugin_choice, row):
            not_steered.append(human(n))
        ratio = b / a if a and b else None
        unsteered = ((row is None or (row["algo"] == "default" and row["channels"] == 0))
                     and nccl_choice != "-" and nccl_choice == plugin_choice)
        if ratio is None:
            missing.append(human(n))
        elif unsteered:
            idle.append(f"{human(n)} ({ratio:.3f})")
        elif sa is None or sb is None:
            unknown.append(human(n))
        else:
            s = max(sa, sb)
            if ratio > 1 + s:
                slower.append(f"{human(n)} (+{pct(ratio - 1)}, spread {pct(s)})")
            elif 1 / ratio > 1 + s:
                faster.append(f"{human(n)} (-{pct(1 - ratio)}, spread {pct(s)})")
        calls = d["calls"].get(str(n), "-")
        out.append(f"| {human(n)} | {human(nb)} | {calls} | {us(a)} | {us(b)} | "
                   f"{f'{ratio:.3f}' if ratio else '-'} | {pct(sa) if sa is not None else '-'} | "
                   f"{pct(sb) if sb is not None else '-'} | {best} | {row_text(row)} | "
                   f"{nccl_choice} | {plugin_choice} |")
    out.append("")
    out.append(f"{collective} ({'graph' if kind == 'graph_us' else 'eager'}), where the plugin "
               f"steered: slower than nccl beyond the spread: {', '.join(slower) or 'none'}; "
               f"faster beyond the spread: {', '.join(faster) or 'none'}"
               + (f"; where it steered nothing (the same choice logged with and without it), "
                  f"plugin / nccl: {', '.join(idle)}" if idle else "")
               + (f"; one run only (no spread): {', '.join(unknown)}" if unknown else "")
               + (f"; no figure: {', '.join(missing)}" if missing else "")
               + (f"; the plugin's logged choice is not the table row's at: "
                  f"{', '.join(not_steered)}" if not_steered and kind == "graph_us" else "")
               + "\n")


def errors(d: dict, out: list) -> None:
    """Every cell that has no figure, per mode and collective, the first
    error text of each distinct kind."""
    lines = []
    named = [(f"nccl_{r}", x) for r, x in zip(d["reps"], d["nccl"])]
    for p in {v["prefix"]: v for v in d["plugin"].values()}.values():
        named += [(f"{p['prefix']}_{r}", x) for r, x in zip(d["reps"], p["runs"])]
    named += [(m, d["forced"][m]) for m in FORCED]
    for name, run in named:
        if run is None:
            lines.append(f"- {name}: no result")
            continue
        if not run.get("complete"):
            lines.append(f"- {name}: incomplete (cut off after {run.get('seconds', '?')} s)")
        for collective in COLLECTIVES:
            seen: dict = {}
            for n in d["sizes"]:
                c = cell(run, collective, n) or {}
                if "error" in c:
                    seen.setdefault(c["error"], []).append(human(n))
                elif "graph_error" in c:
                    seen.setdefault(c["graph_error"], []).append(f"{human(n)} graph only")
            for e, where in seen.items():
                at = "every size" if len(where) == len(d["sizes"]) else ", ".join(where)
                lines.append(f"- {name} {collective} ({at}): {e}")
    if lines:
        out.append("Cells without a figure:\n")
        out.extend(lines)
        out.append("")


def reps_in(path: str) -> list:
    """The run numbers R of path/nccl_R.json, in order."""
    found = [m.group(1) for m in (re.fullmatch(r"nccl_(\d+)\.json", f) for f in os.listdir(path))
             if m]
    return sorted(found, key=int)


def plugin_runs(path: str, reps: list) -> dict:
    """Per kind of figure: the plugin's runs, table and probe (PLUGIN_RUNS)."""
    chosen = {}
    for kind, choices in PLUGIN_RUNS.items():
        for prefix, table, probe in choices:
            runs = [load(os.path.join(path, f"{prefix}_{r}.json")) for r in reps]
            if any(runs) or (prefix, table, probe) == choices[-1]:
                identity, rows, error = read_table(os.path.join(path, table))
                chosen[kind] = {"prefix": prefix, "runs": runs, "table": table,
                                "identity": identity, "rows": rows, "error": error,
                                "probe": read_log(os.path.join(path, f"{probe}.log"))[0],
                                "probe_name": probe}
                break
    return chosen


def report_world(path: str, out: list) -> None:
    reps = reps_in(path)
    plugin = plugin_runs(path, reps)
    runs = {f"nccl_{r}": load(os.path.join(path, f"nccl_{r}.json")) for r in reps}
    runs.update({m: load(os.path.join(path, f"{m}.json")) for m in FORCED})
    for p in plugin.values():
        runs.update({f"{p['prefix']}_{r}": x for r, x in zip(reps, p["runs"])})
    first = next((r for r in runs.values() if r), None)
    if first is None:
        out.append(f"(no results in {path})\n")
        return
    world = first["world"]
    probe_nccl, _ = read_log(os.path.join(path, "probe_nccl.log"))
    d = {"world": world, "sizes": first["sizes"], "calls": first.get("calls", {}),
         "reps": reps, "nccl": [runs[f"nccl_{r}"] for r in reps], "plugin": plugin,
         "forced": {m: runs[m] for m in FORCED}, "probe_nccl": probe_nccl}
    out.append(f"## {world} x {first['device']}, bf16 (torch {first['torch']}, NCCL "
               f"{first['nccl']}, {first['date']})\n")
    out.append("Sizes are each rank's input bytes; NCCL bytes are what NCCL's tuner sees and "
               "the table's rows are keyed by: the larger of a rank's send and receive bytes. "
               "Times in us per call, max over ranks: CUDA graph = median of "
               f"{first.get('replays', '?')} replays of a graph of `calls` calls; eager = "
               "median of as many blocks of `calls` back-to-back calls. best forced: the "
               "fastest of NCCL_ALGO/NCCL_PROTO forced to " + ", ".join(FORCED) + ". table row, "
               "NCCL's choice, with the plugin: algo/proto/channels (a row's 0: NCCL's "
               "channels), the last two from NCCL's TUNING log of one eager call per cell "
               "(probe runs, rank 0).\n")
    for kind, p in plugin.items():
        label = "graph" if kind == "graph_us" else "eager"
        if p["error"]:
            out.append(f"Table for the {label} figures: {p['error']}\n")
        else:
            mine = [r for r in p["rows"] if r["nranks"] == world and r["nnodes"] == 1]
            out.append(f"Table for the {label} figures ({p['table']}, runs {p['prefix']}_R): "
                       f"identity {p['identity']}, {len(p['rows'])} rows, {len(mine)} for "
                       f"{world} ranks on one node.\n")
    out.append("What each run's log says of NCCL's tuner:\n")
    names = [f"nccl_{r}" for r in reps]
    for p in {v["prefix"]: v for v in plugin.values()}.values():
        names += [f"{p['prefix']}_{r}" for r in reps] + [p["probe_name"]]
    for name in names:
        _, tuner = read_log(os.path.join(path, f"{name}.log"))
        if tuner or name.startswith(("plugin", "probe")):
            out.append(f"- {name}: " + (" | ".join(tuner) if tuner else
                                        "NO TUNER LINE (was the plugin loaded?)"))
    out.append("")
    for kind in ("graph_us", "eager_us"):
        for collective in COLLECTIVES:
            if any(collective in (r or {}).get("times", {}) for r in runs.values()):
                collective_table(d, collective, kind, out)
    errors(d, out)


def main() -> int:
    return report_main(__doc__, "# autotuned's NCCL tuner plugin against NCCL's own choices\n",
                       report_world)


if __name__ == "__main__":
    sys.exit(main())
