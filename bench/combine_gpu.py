#!/usr/bin/env python3
"""Combines the GPU measurements of one bench/gpu_run.sh run into a Markdown report.

Standard library only (Python 3.8+), so that it runs on the GPU machine and
anywhere else:

  python3 bench/combine_gpu.py \
      --daemon daemon_allreduce.jsonl [--daemon daemon_allgather.jsonl ...] \
      [--daemon_graph daemon_allreduce_graph.jsonl] \
      [--torch torch.json] [--nccl_tests nccl_tests.txt] \
      [--anchors | --anchors=none | --anchors=FILE.json] \
      [--notes steps.log] [--header "text"] --out gpu_report.md

Inputs (each optional; a missing or broken file is reported, not fatal):
  --daemon        JSON lines of `autotunectl --json sweep`: SweepUpdate
                  messages, {"size_result": ProblemResult} or {"table": ...}.
                  int64 fields are JSON strings, +inf is "Infinity". Event-loop
                  timing. Repeat for the other collectives' sweeps.
  --daemon_graph  the same, measured with --timing=cuda_graph (any collective).
  --torch         bench/torch_collectives.py's JSON.
  --torch_graph   the same, run with --graph (CUDA-graph replays), shown
                  beside the daemon's CUDA-graph timing.
  --nccl_tests    stdout of p2p_bench (one process, NCCL + P2P kernels): one
                  table per mode; the '#' line above it says "eager mode" or
                  "graph mode". The bytes and nccl_us columns are used.
  --nccl_repeats  a folder of daemon_nccl_N.jsonl (autotunectl --json sweep
                  of all_reduce/nccl alone) and indep_nccl_N.txt (p2p_bench
                  --nccl_only), N = 1, 2, ...: the daemon's NCCL and the
                  independent NCCL measured in turn. Compared as the medians
                  of the repeats (the acceptance's 5 % comparison).
  --anchors       the built-in anchor table (default), "none", or a JSON file
                  {"BYTES": [nccl_us, one_shot_us, two_shot_us], ...}.

Every time is in microseconds. A daemon candidate's figure is its median over
the timed iterations (each iteration the max over ranks); torch and p2p_bench
give a mean over a back-to-back loop (max over ranks).
"""

import argparse
import glob
import json
import math
import os
import re
import statistics
import sys

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

# 2 x H200, bf16 sum all-reduce, us: NCCL via torch, symm-mem one_shot,
# symm-mem two_shot.
BUILTIN_ANCHORS = {
    8 * KiB: (24.9, 10.2, 7.8),
    64 * KiB: (24.5, 9.3, 8.4),
    256 * KiB: (40.5, 10.1, 8.7),
    1 * MiB: (27.5, 15.2, 12.0),
    4 * MiB: (32.9, 32.3, 21.9),
    16 * MiB: (74.4, 100.3, 60.0),
    64 * MiB: (246.0, 374.1, 215.4),
    256 * MiB: (889.8, 1453.3, 817.9),
}

# (label, bytes, kind, limit, worlds): kind "max_us" (time at most) or
# "min_busbw" (GB/s at least); checked for runs of those world sizes only
# (None: every one). The 1 MiB and 256 MiB figures are 2-GPU targets.
TARGETS = [
    ("all_reduce bf16 8 KiB", 8 * KiB, "max_us", 6.0, None),
    ("all_reduce bf16 1 MiB", 1 * MiB, "max_us", 10.0, (2,)),
    ("all_reduce bf16 256 MiB", 256 * MiB, "min_busbw", 350.0, (2,)),
]
# The world size BUILTIN_ANCHORS were measured at.
ANCHORS_WORLD = 2

NCCL_TOLERANCE = 0.05  # daemon NCCL vs the independent NCCL figure

DTYPE_BYTES = {"FLOAT32": 4, "BFLOAT16": 2, "FLOAT16": 2, "FP32": 4, "BF16": 2,
               "FP16": 2, "1": 4, "2": 2, "3": 2}
COLLECTIVES = {"1": "all_reduce", "2": "all_gather", "3": "reduce_scatter",
               "4": "all_to_all", "5": "broadcast"}

TORCH_OPS = {
    "nccl": "all_reduce/nccl",
    "one_shot": "all_reduce/symm_one_shot",
    "two_shot": "all_reduce/symm_two_shot",
}


# ---------------------------------------------------------------- values

def num(v):
    """A float from a JSON number or string ("Infinity", "NaN", "12.5");
    None when absent or unreadable."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(str(v).strip())
    except ValueError:
        return None


def intval(v, default=None):
    if v is None or isinstance(v, bool):
        return default
    try:
        return int(str(v).strip())
    except ValueError:
        f = num(v)
        return int(f) if f is not None and math.isfinite(f) else default


def finite(x):
    return x is not None and math.isfinite(x)


def fmt_us(x):
    if x is None:
        return "-"
    if not math.isfinite(x):
        return "FAIL"
    return "%.2f" % x if x < 10 else "%.1f" % x


def fmt_ratio(x):
    return "%.3f" % x if finite(x) else "-"


def fmt_bytes(b):
    if b is None:
        return "-"
    for unit, name in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if b >= unit and b % unit == 0:
            return "%d %s" % (b // unit, name)
    return "%d B" % b


def busbw_gbps(nbytes, us, world=2):
    """nccl-tests' all_reduce bus bandwidth: 2(n-1)/n * bytes / time, GB/s."""
    if not finite(us) or us <= 0:
        return None
    return 2.0 * (world - 1) / world * nbytes / (us * 1e3)


def ratio(a, b):
    if not finite(a) or not finite(b) or b <= 0:
        return None
    return a / b


def collective_name(v):
    s = str(v if v is not None else "").strip()
    return COLLECTIVES.get(s, s.lower())


def dtype_bytes(v):
    return DTYPE_BYTES.get(str(v if v is not None else "").strip().upper())


def dtype_name(v):
    s = str(v if v is not None else "").strip().upper()
    return {"1": "float32", "2": "bfloat16", "3": "float16", "FP32": "float32",
            "BF16": "bfloat16", "FP16": "float16"}.get(s, s.lower())


def candidate_label(candidate, collective=""):
    """impl without the collective prefix, then :name=value,... sorted."""
    if not isinstance(candidate, dict):
        return str(candidate)
    impl = str(candidate.get("impl", "?"))
    prefix = collective + "/"
    if collective and impl.startswith(prefix):
        impl = impl[len(prefix):]
    params = candidate.get("params") or {}
    if isinstance(params, dict) and params:
        impl += ":" + ",".join(
            "%s=%s" % (k, params[k]) for k in sorted(params))
    return impl


# ---------------------------------------------------------------- inputs

def parse_daemon_lines(lines):
    """SweepUpdate JSON lines -> {"sizes": {collective: {bytes: entry}},
    "order": {collective: [labels]}, "tables": [...], "errors": [...]}.

    entry: {"bytes", "count", "dtype", "status", "reason", "winner",
            "winner_us", "candidates": {label: {"ok", "median_us", "mean_us",
            "min_us", "max_us", "busbw_gbps", "reason"}}}
    """
    out = {"sizes": {}, "order": {}, "tables": [], "errors": []}
    for lineno, line in enumerate(lines, 1):
        line = line.strip()
        if not line or not line.startswith("{"):
            continue
        try:
            msg = json.loads(line)
        except ValueError as e:
            out["errors"].append("line %d: not JSON (%s)" % (lineno, e))
            continue
        if not isinstance(msg, dict):
            continue
        if "table" in msg and isinstance(msg["table"], dict):
            out["tables"].append(msg["table"])
        r = msg.get("size_result")
        if not isinstance(r, dict):
            continue
        problem = r.get("problem") or {}
        coll = collective_name(problem.get("collective"))
        count = intval(problem.get("count"), 0)
        esize = dtype_bytes(problem.get("dtype")) or 0
        nbytes = count * esize if esize else intval(r.get("bytes"), 0)
        labels = [candidate_label(c, coll) for c in problem.get("candidates") or []]
        order = out["order"].setdefault(coll, [])
        for label in labels:
            if label not in order:
                order.append(label)
        entry = {"bytes": nbytes, "count": count,
                 "dtype": dtype_name(problem.get("dtype")),
                 "status": str(r.get("status", "")), "reason": str(r.get("reason", "")),
                 "winner": None, "winner_us": None, "candidates": {}}
        for c in r.get("ranked") or []:
            if not isinstance(c, dict):
                continue
            label = candidate_label(c.get("candidate") or {}, coll)
            index = intval(c.get("index"))
            if label not in order and index is not None and 0 <= index < len(labels):
                label = labels[index]  # ranked without canonical params
            if label not in order:
                order.append(label)
            ok = bool(c.get("ok"))
            cand = {"ok": ok, "reason": str(c.get("reason", "")),
                    "median_us": num(c.get("median_us")),
                    "mean_us": num(c.get("mean_us")),
                    "min_us": num(c.get("min_us")),
                    "max_us": num(c.get("max_us")),
                    "busbw_gbps": num(c.get("busbw_gbps"))}
            if not ok:
                cand["median_us"] = math.inf
            entry["candidates"][label] = cand
            if ok and entry["winner"] is None and finite(cand["median_us"]):
                entry["winner"] = label  # ranked is best first
                entry["winner_us"] = cand["median_us"]
        out["sizes"].setdefault(coll, {})[nbytes] = entry
    return out


def merge_daemon(parsed_list):
    merged = {"sizes": {}, "order": {}, "tables": [], "errors": []}
    for p in parsed_list:
        for coll, sizes in p["sizes"].items():
            merged["sizes"].setdefault(coll, {}).update(sizes)
        for coll, labels in p["order"].items():
            order = merged["order"].setdefault(coll, [])
            order.extend(x for x in labels if x not in order)
        merged["tables"].extend(p["tables"])
        merged["errors"].extend(p["errors"])
    return merged


def parse_nccl_tests(text):
    """p2p_bench stdout -> {"eager": {bytes: {"us", "bad"}}, "graph": {...},
    "headers": ['#' lines]}. A table's mode comes from the last '#' line that
    names one ("eager mode" / "graph mode"); eager when none does."""
    out = {"eager": {}, "graph": {}, "headers": []}
    mode = "eager"
    col = 1  # index of nccl_us among whitespace tokens
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        body = line.lstrip("#").strip()
        low = body.lower()
        if line.startswith("#"):
            out["headers"].append(line)
            if "graph mode" in low:
                mode = "graph"
            elif "eager mode" in low:
                mode = "eager"
        tokens = body.split()
        if tokens and tokens[0] == "bytes" and "nccl_us" in tokens:
            col = tokens.index("nccl_us")
            continue
        if line.startswith("#") or len(tokens) <= col:
            continue
        nbytes = intval(tokens[0]) if tokens[0].isdigit() else None
        us = num(tokens[col])
        if nbytes is None or us is None:
            continue
        bad = len(tokens) > col + 1 and tokens[col + 1] == "BAD"
        out[mode][nbytes] = {"us": us, "bad": bad}
    return out


def parse_torch(doc):
    """torch_collectives.py JSON -> {"meta": {...}, "ops": {op: {bytes: r}}}."""
    out = {"meta": {}, "ops": {}}
    if not isinstance(doc, dict):
        return out
    out["meta"] = {k: v for k, v in doc.items() if k != "results"}
    for r in doc.get("results") or []:
        if not isinstance(r, dict):
            continue
        op = str(r.get("op", ""))
        nbytes = intval(r.get("bytes"))
        if nbytes is None:
            continue
        ok = bool(r.get("ok"))
        us = num(r.get("us"))
        out["ops"].setdefault(op, {})[nbytes] = {
            "us": us if ok else None, "ok": ok, "error": str(r.get("error") or "")}
    return out


def repeat_index(path):
    m = re.search(r"_(\d+)\.[a-z]+$", os.path.basename(path))
    return int(m.group(1)) if m else 0


def load_nccl_repeats(folder, inputs):
    """--nccl_repeats FOLDER -> {"daemon": {bytes: [us, ...]}, "daemon_mean":
    {...}, "indep": {...}, "runs": (daemon files, indep files)}; one figure
    per repeat and size: the daemon's NCCL median (what it ranks by) and mean
    (total loop time / iterations, nccl-tests' figure), p2p_bench's eager
    NCCL."""
    out = {"daemon": {}, "daemon_mean": {}, "indep": {}, "runs": (0, 0)}
    dfiles = sorted(glob.glob(os.path.join(folder, "daemon_nccl_*.jsonl")), key=repeat_index)
    ifiles = sorted(glob.glob(os.path.join(folder, "indep_nccl_*.txt")), key=repeat_index)
    for path in dfiles:
        text = read_text(path, inputs, "nccl repeat")
        if text is None:
            continue
        d = parse_daemon_lines(text.splitlines())
        label = nccl_label(d["order"].get("all_reduce", []))
        for b, e in d["sizes"].get("all_reduce", {}).items():
            c = e["candidates"].get(label) if label else None
            if c and c["ok"] and finite(c["median_us"]):
                out["daemon"].setdefault(b, []).append(c["median_us"])
                if finite(c["mean_us"]):
                    out["daemon_mean"].setdefault(b, []).append(c["mean_us"])
    for path in ifiles:
        text = read_text(path, inputs, "nccl repeat")
        if text is None:
            continue
        for b, r in parse_nccl_tests(text)["eager"].items():
            if not r["bad"] and finite(r["us"]):
                out["indep"].setdefault(b, []).append(r["us"])
    out["runs"] = (len(dfiles), len(ifiles))
    inputs.append("nccl repeats %s: %d daemon runs, %d independent runs" % (
        folder, len(dfiles), len(ifiles)))
    return out


def repeat_rows(rep):
    """Per size: both sides' repeats, their medians and the ratio of medians."""
    rows = []
    for b in sorted(set(rep["daemon"]) | set(rep["indep"])):
        d = rep["daemon"].get(b, [])
        i = rep["indep"].get(b, [])
        row = {"bytes": b, "daemon": d, "indep": i,
               "daemon_median": statistics.median(d) if d else None,
               "indep_median": statistics.median(i) if i else None}
        dm = rep.get("daemon_mean", {}).get(b, [])
        row["daemon_mean_median"] = statistics.median(dm) if dm else None
        row["mean_ratio"] = ratio(row["daemon_mean_median"], row["indep_median"])
        row["ratio"] = ratio(row["daemon_median"], row["indep_median"])
        row["within"] = (abs(row["ratio"] - 1.0) <= NCCL_TOLERANCE
                         if row["ratio"] is not None else None)
        rows.append(row)
    return rows


def fmt_range(xs):
    return "%s-%s" % (fmt_us(min(xs)), fmt_us(max(xs))) if xs else "-"


def load_anchors(spec):
    if spec in (None, "", "builtin"):
        return dict(BUILTIN_ANCHORS), ""
    if spec == "none":
        return {}, ""
    try:
        with open(spec) as f:
            doc = json.load(f)
        return {int(k): tuple(float(x) for x in v) for k, v in doc.items()}, ""
    except (OSError, ValueError, TypeError) as e:
        return dict(BUILTIN_ANCHORS), "anchors %s unreadable (%s); built-in used" % (spec, e)


# ---------------------------------------------------------------- rows

def torch_us(torch_data, key, nbytes):
    r = torch_data["ops"].get(TORCH_OPS.get(key, key), {}).get(nbytes)
    return r["us"] if r else None


def nccl_label(labels):
    for label in labels:
        if label == "nccl" or label.startswith("nccl:") or label.endswith("/nccl"):
            return label
    return None


def allreduce_rows(daemon, torch_data, nccl_tests, anchors, world=2):
    """One dict per all_reduce size (event-loop daemon figures)."""
    sizes = daemon["sizes"].get("all_reduce", {})
    labels = daemon["order"].get("all_reduce", [])
    nlabel = nccl_label(labels)
    all_bytes = set(sizes)
    for key in TORCH_OPS:
        all_bytes |= set(torch_data["ops"].get(TORCH_OPS[key], {}))
    all_bytes |= set(nccl_tests["eager"]) | set(nccl_tests["graph"])
    if not all_bytes:
        all_bytes = set(anchors)
    rows = []
    for b in sorted(all_bytes):
        e = sizes.get(b)
        cands = e["candidates"] if e else {}
        row = {"bytes": b, "dtype": e["dtype"] if e else None,
               "candidates": {l: cands[l]["median_us"] for l in labels if l in cands},
               "winner": e["winner"] if e else None,
               "winner_us": e["winner_us"] if e else None,
               "daemon_nccl_us": (cands[nlabel]["median_us"]
                                  if nlabel and nlabel in cands else None),
               "torch_nccl_us": torch_us(torch_data, "nccl", b),
               "torch_one_shot_us": torch_us(torch_data, "one_shot", b),
               "torch_two_shot_us": torch_us(torch_data, "two_shot", b),
               "indep_nccl_us": nccl_tests["eager"].get(b, {}).get("us"),
               "indep_nccl_bad": nccl_tests["eager"].get(b, {}).get("bad", False),
               "indep_nccl_graph_us": nccl_tests["graph"].get(b, {}).get("us"),
               "anchor": anchors.get(b)}
        torch_figs = [x for x in (row["torch_nccl_us"], row["torch_one_shot_us"],
                                  row["torch_two_shot_us"]) if finite(x)]
        row["torch_best_us"] = min(torch_figs) if torch_figs else None
        row["nccl_ratio"] = ratio(row["daemon_nccl_us"], row["indep_nccl_us"])
        row["nccl_within"] = (abs(row["nccl_ratio"] - 1.0) <= NCCL_TOLERANCE
                              if row["nccl_ratio"] is not None else None)
        row["win_vs_torch"] = ratio(row["winner_us"], row["torch_best_us"])
        row["win_vs_anchor"] = ratio(row["winner_us"],
                                     min(row["anchor"]) if row["anchor"] else None)
        row["busbw"] = busbw_gbps(b, row["winner_us"], world)
        rows.append(row)
    return rows


def graph_rows(daemon_graph, nccl_tests, world=2, torch_graph=None):
    sizes = daemon_graph["sizes"].get("all_reduce", {})
    labels = daemon_graph["order"].get("all_reduce", [])
    nlabel = nccl_label(labels)
    rows = []
    for b in sorted(sizes):
        e = sizes[b]
        cands = e["candidates"]
        row = {"bytes": b, "dtype": e["dtype"],
               "candidates": {l: cands[l]["median_us"] for l in labels if l in cands},
               "winner": e["winner"], "winner_us": e["winner_us"],
               "daemon_nccl_us": (cands[nlabel]["median_us"]
                                  if nlabel and nlabel in cands else None),
               "indep_nccl_graph_us": nccl_tests["graph"].get(b, {}).get("us")}
        row["nccl_ratio"] = ratio(row["daemon_nccl_us"], row["indep_nccl_graph_us"])
        row["nccl_within"] = (abs(row["nccl_ratio"] - 1.0) <= NCCL_TOLERANCE
                              if row["nccl_ratio"] is not None else None)
        row["busbw"] = busbw_gbps(b, row["winner_us"], world)
        tg = torch_graph or parse_torch(None)
        for key in TORCH_OPS:
            row["torch_%s_us" % key] = torch_us(tg, key, b)
        figs = [row["torch_%s_us" % k] for k in TORCH_OPS if finite(row["torch_%s_us" % k])]
        row["torch_best_us"] = min(figs) if figs else None
        row["win_vs_torch"] = ratio(row["winner_us"], row["torch_best_us"])
        rows.append(row)
    return rows


def collective_rows(daemon, torch_data, coll):
    sizes = daemon["sizes"].get(coll, {})
    labels = daemon["order"].get(coll, [])
    nlabel = nccl_label(labels)
    torch_ops = torch_data["ops"].get(coll + "/nccl", {})
    rows = []
    for b in sorted(set(sizes) | set(torch_ops)):
        e = sizes.get(b)
        cands = e["candidates"] if e else {}
        t = torch_ops.get(b)
        row = {"bytes": b,
               "candidates": {l: cands[l]["median_us"] for l in labels if l in cands},
               "winner": e["winner"] if e else None,
               "winner_us": e["winner_us"] if e else None,
               "daemon_nccl_us": (cands[nlabel]["median_us"]
                                  if nlabel and nlabel in cands else None),
               "torch_nccl_us": t["us"] if t else None}
        row["nccl_vs_torch"] = ratio(row["daemon_nccl_us"], row["torch_nccl_us"])
        row["win_vs_torch"] = ratio(row["winner_us"], row["torch_nccl_us"])
        rows.append(row)
    return rows


OTHER_COLLECTIVES = ("all_gather", "reduce_scatter", "all_to_all", "broadcast")


def other_collective_tables(out, daemon, torch_data):
    """Appends one table per collective of OTHER_COLLECTIVES that `daemon`
    measured (beside torch_data's NCCL) to `out`; returns every row, each
    with its "collective"."""
    every = []
    for coll in OTHER_COLLECTIVES:
        crows = collective_rows(daemon, torch_data, coll)
        if not crows:
            continue
        clabels = daemon["order"].get(coll, [])
        body = []
        for r in crows:
            r["collective"] = coll
            body.append([coll, fmt_bytes(r["bytes"])] +
                        [fmt_us(r["candidates"].get(l)) for l in clabels] +
                        [r["winner"] or "-", fmt_us(r["winner_us"]),
                         fmt_us(r["torch_nccl_us"]), fmt_ratio(r["nccl_vs_torch"]),
                         fmt_ratio(r["win_vs_torch"])])
        out.append(md_table(["collective", "size"] + clabels +
                            ["winner", "winner us", "torch nccl",
                             "daemon nccl / torch nccl", "winner / torch nccl"], body))
        out.append("")
        every.extend(crows)
    return every


def target_checks(rows, world=2):
    """[(label, verdict, figure text)] from rows (allreduce_rows/graph_rows)."""
    by_bytes = {r["bytes"]: r for r in rows}
    out = []
    for label, nbytes, kind, limit, worlds in TARGETS:
        if worlds is not None and world not in worlds:
            continue
        r = by_bytes.get(nbytes)
        us = r["winner_us"] if r else None
        if r and r.get("dtype") not in (None, "bfloat16") and finite(us):
            out.append((label, "no data", "only %s was measured" % r["dtype"]))
            continue
        if not finite(us):
            out.append((label, "no data", "no working daemon candidate measured"))
            continue
        who = r["winner"]
        if kind == "max_us":
            met = us <= limit
            fig = "%s us (%s) vs <= %g us" % (fmt_us(us), who, limit)
        else:
            bw = busbw_gbps(nbytes, us, world)
            met = bw >= limit
            fig = "busbw %.1f GB/s (%s us, %s) vs >= %g GB/s" % (bw, fmt_us(us), who, limit)
        out.append((label, "met" if met else "NOT met", fig))
    return out


# ---------------------------------------------------------------- Markdown

def md_table(header, body):
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    for row in body:
        lines.append("| " + " | ".join(str(x) for x in row) + " |")
    return "\n".join(lines)


def within_mark(w):
    return "" if w is None else (" ok" if w else " OFF")


def group_failures(fails):
    """Merges "WHAT SIZE: reason" lines that differ only in the size."""
    groups = {}
    order = []
    for f in fails:
        head, sep, reason = f.partition(": ")
        words = head.split(" ")
        # The size is the two words "N UNIT" after the op name(s).
        for i in range(len(words) - 1):
            if words[i].isdigit() and words[i + 1] in ("B", "KiB", "MiB", "GiB"):
                key = (" ".join(words[:i]), " ".join(words[i + 2:]), reason)
                size = words[i] + " " + words[i + 1]
                break
        else:
            key, size = (f, "", ""), None
        if key not in groups:
            groups[key] = []
            order.append(key)
        if size:
            groups[key].append(size)
    out = []
    for key in order:
        what, rest, reason = key
        sizes = groups[key]
        if not sizes:
            out.append(what)
            continue
        head = " ".join(x for x in (what, ", ".join(sizes), rest) if x)
        out.append(head + ": " + reason)
    return out


def not_won(rows):
    lost = ["%s %s" % (fmt_bytes(r["bytes"]), fmt_ratio(r["win_vs_torch"]))
            for r in rows if r["win_vs_torch"] > 1.0]
    return " (above at " + ", ".join(lost) + ")" if lost else ""


def render_report(header, inputs, daemon, daemon_graph, torch_data, nccl_tests,
                  anchors, notes="", world=2, repeats=None, torch_graph=None):
    out = []
    out.append("# autotuned GPU check")
    out.append("")
    if header:
        out.append(header.rstrip())
        out.append("")

    # Inputs.
    out.append("## Inputs")
    out.append("")
    for line in inputs:
        out.append("- " + line)
    meta = torch_data.get("meta") or {}
    if meta:
        out.append("- torch %s, NCCL %s (torch's), %s x %s%s" % (
            meta.get("torch", "?"), meta.get("nccl", "?"), meta.get("world", "?"),
            meta.get("device", "?"),
            "" if meta.get("complete", True) else "; torch run INCOMPLETE (cut off?)"))
        if meta.get("symm_mem_error"):
            out.append("- torch symmetric memory: %s" % meta["symm_mem_error"])
    for h in nccl_tests.get("headers", []):
        if "p2p_bench" in h or "mode" in h:
            out.append("- p2p_bench: `%s`" % h.lstrip("#").strip())
    for err in daemon["errors"] + daemon_graph["errors"]:
        out.append("- daemon output: %s" % err)
    out.append("")
    out.append("Times in us. Daemon: median over the timed iterations (each the max "
               "over ranks). torch and p2p_bench (\"indep.\"): mean over a back-to-back "
               "loop, max over ranks. busbw = 2(n-1)/n x bytes / time, n = %d." % world)
    out.append("")

    # all_reduce, event loop.
    rows = allreduce_rows(daemon, torch_data, nccl_tests, anchors, world)
    labels = daemon["order"].get("all_reduce", [])
    dtypes = sorted({e["dtype"] for e in daemon["sizes"].get("all_reduce", {}).values()})
    out.append("## all_reduce %s: daemon candidates (event-loop timing)" % (
        "/".join(dtypes) if dtypes else "bf16"))
    out.append("")
    if labels:
        body = []
        for r in rows:
            if r["winner"] is None and not r["candidates"]:
                continue
            body.append([fmt_bytes(r["bytes"])] +
                        [fmt_us(r["candidates"].get(l)) for l in labels] +
                        [r["winner"] or "-", fmt_us(r["winner_us"]),
                         "%.1f" % r["busbw"] if finite(r["busbw"]) else "-"])
        out.append(md_table(["size"] + labels + ["winner", "winner us", "busbw GB/s"], body))
    else:
        out.append("(no daemon all_reduce results)")
    out.append("")

    out.append("## all_reduce: daemon vs independent NCCL, torch and anchors")
    out.append("")
    out.append("nccl / indep.: the daemon's NCCL candidate over p2p_bench's NCCL "
               "(eager), one run each (see also the repeated comparison). winner / "
               "torch: the daemon's winner over the best of torch's three (<= 1.0: we win).")
    out.append("")
    body = []
    for r in rows:
        a = r["anchor"]
        body.append([
            fmt_bytes(r["bytes"]), r["winner"] or "-", fmt_us(r["winner_us"]),
            fmt_us(r["daemon_nccl_us"]),
            fmt_us(r["indep_nccl_us"]) + (" BAD" if r["indep_nccl_bad"] else ""),
            fmt_ratio(r["nccl_ratio"]) + within_mark(r["nccl_within"]),
            fmt_us(r["indep_nccl_graph_us"]),
            fmt_us(r["torch_nccl_us"]), fmt_us(r["torch_one_shot_us"]),
            fmt_us(r["torch_two_shot_us"]), fmt_ratio(r["win_vs_torch"]),
            " / ".join("%.1f" % x for x in a) if a else "-",
            fmt_ratio(r["win_vs_anchor"])])
    out.append(md_table(
        ["size", "daemon winner", "winner us", "daemon nccl", "indep. nccl",
         "nccl / indep.", "indep. nccl graph", "torch nccl", "torch one_shot",
         "torch two_shot", "winner / torch best", "anchor nccl / one / two",
         "winner / anchor best"], body))
    out.append("")

    # all_reduce NCCL, repeated.
    rrows = repeat_rows(repeats) if repeats else []
    if rrows:
        out.append("## all_reduce: daemon NCCL vs independent NCCL, repeated")
        out.append("")
        out.append("The daemon (a fresh one each time, all_reduce/nccl alone) and "
                   "p2p_bench --nccl_only, measured in turn %d and %d times with the same "
                   "sizes and iterations; the acceptance wants the ratio of their medians "
                   "within %d %%. Daemon figures: its NCCL median (what it ranks by); "
                   "\"daemon loop mean\": the median over the repeats of its loop mean "
                   "(total time / iterations, the statistic p2p_bench and nccl-tests "
                   "print)." % (repeats["runs"][0], repeats["runs"][1],
                               round(NCCL_TOLERANCE * 100)))
        out.append("")
        body = []
        for r in rrows:
            body.append([fmt_bytes(r["bytes"]), str(len(r["daemon"])),
                         fmt_us(r["daemon_median"]), fmt_range(r["daemon"]),
                         str(len(r["indep"])), fmt_us(r["indep_median"]),
                         fmt_range(r["indep"]),
                         fmt_ratio(r["ratio"]) + within_mark(r["within"]),
                         fmt_us(r["daemon_mean_median"]), fmt_ratio(r["mean_ratio"])])
        out.append(md_table(["size", "daemon runs", "daemon median", "daemon min-max",
                             "indep. runs", "indep. median", "indep. min-max",
                             "median / median", "daemon loop mean", "loop mean / indep."],
                            body))
        out.append("")

    # all_reduce, CUDA graph.
    grows = graph_rows(daemon_graph, nccl_tests, world, torch_graph)
    with_tg = bool(torch_graph and torch_graph["ops"])
    if grows:
        glabels = daemon_graph["order"].get("all_reduce", [])
        out.append("## all_reduce: daemon candidates (CUDA-graph timing)")
        out.append("")
        if with_tg:
            out.append("torch graph: bench/torch_collectives.py --graph, the same ops "
                       "captured in one CUDA graph per loop.")
            out.append("")
        body = []
        for r in grows:
            cells = ([fmt_bytes(r["bytes"])] +
                     [fmt_us(r["candidates"].get(l)) for l in glabels] +
                     [r["winner"] or "-", fmt_us(r["winner_us"]),
                      fmt_us(r["indep_nccl_graph_us"]),
                      fmt_ratio(r["nccl_ratio"]) + within_mark(r["nccl_within"])])
            if with_tg:
                cells += [fmt_us(r["torch_nccl_us"]), fmt_us(r["torch_one_shot_us"]),
                          fmt_us(r["torch_two_shot_us"]), fmt_ratio(r["win_vs_torch"])]
            body.append(cells)
        head = ["size"] + glabels + ["winner", "winner us", "indep. nccl graph",
                                     "nccl / indep. graph"]
        if with_tg:
            head += ["torch graph nccl", "torch graph one_shot", "torch graph two_shot",
                     "winner / torch graph best"]
        out.append(md_table(head, body))
        out.append("")

    # The other collectives, eagerly and (where measured) under CUDA graphs.
    out.append("## all_gather / reduce_scatter / all_to_all / broadcast (bytes per rank: "
               "all_gather input, reduce_scatter output, all_to_all to each rank, broadcast "
               "buffer)")
    out.append("")
    crows_eager = other_collective_tables(out, daemon, torch_data)
    if not crows_eager:
        out.append("(no all_gather / reduce_scatter / all_to_all / broadcast results)")
        out.append("")
    crows_graph = []
    if any(daemon_graph["sizes"].get(c) for c in OTHER_COLLECTIVES):
        out.append("## all_gather / reduce_scatter / all_to_all / broadcast, CUDA-graph timing "
                   "(torch: --graph)")
        out.append("")
        crows_graph = other_collective_tables(out, daemon_graph,
                                              torch_graph or parse_torch(None))

    # Targets.
    out.append("## Targets (daemon winner)")
    out.append("")
    for label, verdict, fig in target_checks(rows, world):
        out.append("- %s, event-loop timing: **%s** (%s)" % (label, verdict, fig))
    if grows:
        for label, verdict, fig in target_checks(grows, world):
            out.append("- %s, CUDA-graph timing: **%s** (%s)" % (label, verdict, fig))
    out.append("")

    # Summary.
    out.append("## Summary")
    out.append("")
    compared = [r for r in rows if r["nccl_within"] is not None]
    off = [fmt_bytes(r["bytes"]) for r in compared if not r["nccl_within"]]
    rc = [r for r in rrows if r["within"] is not None]
    if rc:
        roff = [fmt_bytes(r["bytes"]) for r in rc if not r["within"]]
        out.append("- daemon NCCL within %d %% of the independent NCCL (eager), medians "
                   "of the repeats: %d of %d sizes%s" % (
                       round(NCCL_TOLERANCE * 100), len(rc) - len(roff), len(rc),
                       (" (off at " + ", ".join(roff) + ")") if roff else ""))
    out.append("- daemon NCCL within %d %% of the independent NCCL (eager), one run each: "
               "%d of %d sizes%s" % (
                   round(NCCL_TOLERANCE * 100), len(compared) - len(off), len(compared),
                   (" (off at " + ", ".join(off) + ")") if off else ""))
    if grows:
        gc = [r for r in grows if r["nccl_within"] is not None]
        goff = [fmt_bytes(r["bytes"]) for r in gc if not r["nccl_within"]]
        out.append("- daemon NCCL within %d %% of the independent NCCL (graph): %d of %d sizes%s" % (
            round(NCCL_TOLERANCE * 100), len(gc) - len(goff), len(gc),
            (" (off at " + ", ".join(goff) + ")") if goff else ""))
    vs = [r for r in rows if r["win_vs_torch"] is not None]
    wins = [r for r in vs if r["win_vs_torch"] <= 1.0]
    out.append("- daemon winner at or below torch's best: %d of %d sizes%s" % (
        len(wins), len(vs), not_won(vs)))
    for mode, crows in (("event-loop", crows_eager), ("CUDA-graph", crows_graph)):
        cvs = [r for r in crows if r["win_vs_torch"] is not None]
        if cvs:
            above = ["%s %s %s" % (r["collective"], fmt_bytes(r["bytes"]),
                                   fmt_ratio(r["win_vs_torch"]))
                     for r in cvs if r["win_vs_torch"] > 1.0]
            out.append("- all_gather / reduce_scatter / all_to_all / broadcast, %s timing: "
                       "daemon winner at or below torch's NCCL at %d of %d sizes%s" % (
                           mode, len(cvs) - len(above), len(cvs),
                           (" (above at " + ", ".join(above) + ")") if above else ""))
    gvs = [r for r in grows if r["win_vs_torch"] is not None]
    if gvs:
        gwins = [r for r in gvs if r["win_vs_torch"] <= 1.0]
        out.append("- under CUDA graphs on both sides: daemon winner at or below torch's "
                   "best: %d of %d sizes%s" % (len(gwins), len(gvs), not_won(gvs)))
    out.append("")

    # Failures.
    fails = []
    for name, d in (("event-loop", daemon), ("cuda-graph", daemon_graph)):
        for coll in sorted(d["sizes"]):
            for b in sorted(d["sizes"][coll]):
                e = d["sizes"][coll][b]
                if e["status"] and e["status"] not in ("TUNED", "CACHED"):
                    fails.append("daemon %s %s %s: status %s: %s" % (
                        name, coll, fmt_bytes(b), e["status"], e["reason"]))
                for label, c in e["candidates"].items():
                    if not c["ok"]:
                        fails.append("daemon %s %s %s %s: %s" % (
                            name, coll, fmt_bytes(b), label, c["reason"] or "failed"))
    for op in sorted(torch_data["ops"]):
        for b in sorted(torch_data["ops"][op]):
            r = torch_data["ops"][op][b]
            if not r["ok"]:
                fails.append("torch %s %s: %s" % (op, fmt_bytes(b), r["error"] or "failed"))
    for mode in ("eager", "graph"):
        for b in sorted(nccl_tests[mode]):
            if nccl_tests[mode][b]["bad"]:
                fails.append("p2p_bench %s NCCL %s: BAD output" % (mode, fmt_bytes(b)))
    if fails:
        out.append("## Failures")
        out.append("")
        limit = 60
        fails = group_failures(fails)
        for f in fails[:limit]:
            out.append("- " + f.replace("\n", " "))
        if len(fails) > limit:
            out.append("- ... %d more" % (len(fails) - limit))
        out.append("")

    if notes.strip():
        out.append("## Steps")
        out.append("")
        out.append("```")
        out.append(notes.rstrip())
        out.append("```")
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------- main

def read_text(path, inputs, what):
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError as e:
        inputs.append("%s %s: unreadable (%s)" % (what, path, e.strerror or e))
        return None
    return text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--daemon", action="append", default=[],
                   help="autotunectl --json sweep output (repeatable)")
    p.add_argument("--daemon_graph", action="append", default=[],
                   help="the same with --timing=cuda_graph (repeatable)")
    p.add_argument("--torch", help="torch_collectives.py JSON")
    p.add_argument("--torch_graph", help="torch_collectives.py --graph JSON")
    p.add_argument("--nccl_tests", help="p2p_bench stdout")
    p.add_argument("--nccl_repeats", help="folder of daemon_nccl_N.jsonl / indep_nccl_N.txt")
    p.add_argument("--anchors", nargs="?", const="builtin", default="builtin",
                   help="built-in anchors (default), 'none', or a JSON file")
    p.add_argument("--notes", help="a text file appended under 'Steps'")
    p.add_argument("--header", default="", help="text put under the title")
    p.add_argument("--world", type=int, default=2, help="ranks, for busbw (2)")
    p.add_argument("--out", required=True, help="the Markdown report")
    a = p.parse_args(argv)

    inputs = []

    def daemon_files(paths, what):
        parsed = []
        for path in paths:
            text = read_text(path, inputs, what)
            if text is None:
                continue
            d = parse_daemon_lines(text.splitlines())
            n = sum(len(s) for s in d["sizes"].values())
            inputs.append("%s %s: %d size results (%s)" % (
                what, path, n, ", ".join(sorted(d["sizes"])) or "none"))
            parsed.append(d)
        return merge_daemon(parsed)

    daemon = daemon_files(a.daemon, "daemon")
    daemon_graph = daemon_files(a.daemon_graph, "daemon (cuda_graph)")

    def torch_file(path, what):
        if not path:
            return parse_torch(None)
        text = read_text(path, inputs, what)
        if text is None:
            return parse_torch(None)
        try:
            data = parse_torch(json.loads(text))
        except ValueError as e:
            inputs.append("%s %s: not JSON (%s)" % (what, path, e))
            return parse_torch(None)
        inputs.append("%s %s: %d results" % (
            what, path, sum(len(v) for v in data["ops"].values())))
        return data

    torch_data = torch_file(a.torch, "torch")
    torch_graph = torch_file(a.torch_graph, "torch graph")

    nccl_tests = parse_nccl_tests("")
    if a.nccl_tests:
        text = read_text(a.nccl_tests, inputs, "nccl_tests")
        if text is not None:
            nccl_tests = parse_nccl_tests(text)
            inputs.append("nccl_tests %s: %d eager rows, %d graph rows" % (
                a.nccl_tests, len(nccl_tests["eager"]), len(nccl_tests["graph"])))

    repeats = None
    if a.nccl_repeats:
        if os.path.isdir(a.nccl_repeats):
            repeats = load_nccl_repeats(a.nccl_repeats, inputs)
        else:
            inputs.append("nccl repeats %s: no such folder" % a.nccl_repeats)

    anchors, why = load_anchors(a.anchors)
    if why:
        inputs.append(why)
    builtin = a.anchors in (None, "", "builtin")
    if builtin and a.world != ANCHORS_WORLD:
        anchors = {}
        inputs.append("anchors: none (the built-in ones are %d-GPU figures; this run has %d)"
                      % (ANCHORS_WORLD, a.world))
    else:
        inputs.append("anchors: %s" % ("built-in (2 x H200, torch NCCL / symm-mem one_shot / "
                                       "two_shot)" if builtin else a.anchors))

    notes = ""
    if a.notes:
        notes = read_text(a.notes, inputs, "notes") or ""

    report = render_report(a.header, inputs, daemon, daemon_graph, torch_data,
                           nccl_tests, anchors, notes, a.world, repeats, torch_graph)
    with open(a.out, "w") as f:
        f.write(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
