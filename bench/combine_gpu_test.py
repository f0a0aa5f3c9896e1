#!/usr/bin/env python3
"""Tests bench/combine_gpu.py on small synthetic inputs in its three formats.

  python3 bench/combine_gpu_test.py        (standard library only)
"""

import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import combine_gpu as cg  # noqa: E402

KiB = 1 << 10
MiB = 1 << 20


def cand(impl, params=None):
    return {"impl": impl, "params": {k: str(v) for k, v in (params or {}).items()}}


def ranked(c, index, median, ok=True, reason=""):
    if not ok:
        return {"candidate": c, "index": index, "ok": False, "reason": reason,
                "mean_us": "Infinity", "median_us": "Infinity", "min_us": "Infinity",
                "max_us": "Infinity", "spread": 0, "rank_mean_us": [],
                "algbw_gbps": 0, "busbw_gbps": 0, "iterations": 0}
    return {"candidate": c, "index": index, "ok": True, "reason": "",
            "mean_us": median * 1.01, "median_us": median, "min_us": median * 0.9,
            "max_us": median * 1.2, "spread": 0.3, "rank_mean_us": [median, median],
            "algbw_gbps": 1.0, "busbw_gbps": 1.0, "iterations": 50}


AR = "all_reduce"
C_NCCL = cand("all_reduce/nccl")
C_ONE = cand("all_reduce/one_shot", {"blocks": 32, "threads": 512})
C_ONE_BIG = cand("all_reduce/one_shot", {"threads": 1024, "blocks": 64})
C_TWO = cand("all_reduce/two_shot", {"blocks": 32, "threads": 512})
AR_CANDS = [C_NCCL, C_ONE, C_ONE_BIG, C_TWO]


def size_result(collective, count, cands, ranked_list, dtype="BFLOAT16", status="TUNED"):
    winner = next((r for r in ranked_list if r["ok"]), None)
    return {"size_result": {
        "problem": {"collective": collective.upper(), "dtype": dtype, "count": str(count),
                    "split_counts": [], "op": "SUM", "root": 0, "candidates": cands,
                    "label": ""},
        "status": status, "reason": "fastest median",
        "winner": winner["candidate"]["impl"] if winner else "",
        "winner_index": winner["index"] if winner else 0,
        "ranked": ranked_list, "cache_key": "k", "measured_unix_ms": "1",
        "bytes": str(count * 2)}, "done": 1, "total": 3}


def daemon_allreduce_lines(scale=1.0):
    # 8 KiB: one_shot 64x1024 wins (5.5); two_shot fails.
    # 1 MiB: two_shot wins (12.0).  256 MiB: nccl wins (700).
    s = scale
    msgs = [
        size_result(AR, 4096, AR_CANDS, [
            ranked(C_ONE_BIG, 2, 5.5 * s), ranked(C_ONE, 1, 7.0 * s),
            ranked(C_NCCL, 0, 24.9 * s),
            ranked(C_TWO, 3, None, ok=False, reason="rank 1: verify: mismatch")]),
        size_result(AR, MiB // 2, AR_CANDS, [
            ranked(C_TWO, 3, 12.0 * s), ranked(C_ONE, 1, 14.0 * s),
            ranked(C_ONE_BIG, 2, 15.0 * s), ranked(C_NCCL, 0, 30.0 * s)]),
        size_result(AR, 128 * MiB, AR_CANDS, [
            ranked(C_NCCL, 0, 700.0 * s), ranked(C_TWO, 3, 800.0 * s),
            ranked(C_ONE, 1, 1400.0 * s), ranked(C_ONE_BIG, 2, 1300.0 * s)]),
        {"table": {"ranges": [{"min_count": "4096", "max_count": "4096",
                               "min_bytes": "8192", "max_bytes": "8192",
                               "winner": "all_reduce/one_shot", "winner_index": 2}]},
         "done": 3, "total": 3},
    ]
    return [json.dumps(m, separators=(",", ":")) for m in msgs]


def daemon_collective_lines(scale=1.0):
    ag = [cand("all_gather/nccl"), cand("all_gather/p2p", {"blocks": 32, "threads": 512})]
    rs = [cand("reduce_scatter/nccl"),
          cand("reduce_scatter/p2p", {"blocks": 32, "threads": 512})]
    msgs = [
        size_result("all_gather", 32 * KiB, ag,
                    [ranked(ag[1], 1, 8.0 * scale), ranked(ag[0], 0, 20.0 * scale)]),
        size_result("reduce_scatter", 32 * KiB, rs,
                    [ranked(rs[0], 0, 22.0 * scale), ranked(rs[1], 1, None, ok=False,
                                                     reason="DEADLINE_EXCEEDED")]),
    ]
    return [json.dumps(m) for m in msgs]


TORCH_DOC = {
    "torch": "2.11.0+cu130", "nccl": "2.27.7", "device": "NVIDIA H200", "world": 2,
    "complete": True,
    "results": [
        {"op": "all_reduce/nccl", "bytes": 8192, "us": 24.0, "ok": True, "error": ""},
        {"op": "all_reduce/symm_one_shot", "bytes": 8192, "us": 10.0, "ok": True, "error": ""},
        {"op": "all_reduce/symm_two_shot", "bytes": 8192, "us": 7.5, "ok": True, "error": ""},
        {"op": "all_reduce/nccl", "bytes": MiB, "us": 27.0, "ok": True, "error": ""},
        {"op": "all_reduce/symm_one_shot", "bytes": MiB, "us": None, "ok": False,
         "error": "RuntimeError: boom"},
        {"op": "all_reduce/symm_two_shot", "bytes": MiB, "us": 11.0, "ok": True, "error": ""},
        {"op": "all_reduce/nccl", "bytes": 256 * MiB, "us": 890.0, "ok": True, "error": ""},
        {"op": "all_gather/nccl", "bytes": 64 * KiB, "us": 16.0, "ok": True, "error": ""},
        {"op": "reduce_scatter/nccl", "bytes": 64 * KiB, "us": 20.0, "ok": True, "error": ""},
    ],
}

# Eager table with a '#'-prefixed column header, graph table with a plain one.
NCCL_TESTS = """\
# p2p_bench: 2 x NVIDIA H200, NCCL 22707, autotuned kernels 1, eager mode, iters 50, warmup 10, bf16 sum
#       bytes        nccl_us                one_shot_us                two_shot_us                two_shot_chunked_us   busbw_GB/s winner
        8192           24.0              5.2 (64x1024)              7.0 (32x512)                                  -          1.6 one_shot
     1048576           24.0             14.0 (64x1024)             11.0 (32x512)                                  -         95.3 two_shot
   268435456       690.0 BAD         1400.0 (64x1024)            800.0 (32x512)       780.0 (64x1024 c131072)        389.0 nccl
# BAD output: 268435456 nccl
# p2p_bench: 2 x NVIDIA H200, NCCL 22707, autotuned kernels 1, graph mode, iters 50, warmup 10, bf16 sum
       bytes        nccl_us                one_shot_us                two_shot_us                two_shot_chunked_us   busbw_GB/s winner
        8192           20.0              4.0 (64x1024)              6.0 (32x512)                                  -          2.0 one_shot
"""


class ParseTest(unittest.TestCase):
    def test_daemon_lines(self):
        d = cg.parse_daemon_lines(daemon_allreduce_lines() + ["", "not json", "{bad"])
        self.assertEqual(len(d["errors"]), 1)
        self.assertEqual(len(d["tables"]), 1)
        sizes = d["sizes"]["all_reduce"]
        self.assertEqual(sorted(sizes), [8 * KiB, MiB, 256 * MiB])
        self.assertEqual(d["order"]["all_reduce"],
                         ["nccl", "one_shot:blocks=32,threads=512",
                          "one_shot:blocks=64,threads=1024",
                          "two_shot:blocks=32,threads=512"])
        e = sizes[8 * KiB]
        self.assertEqual(e["dtype"], "bfloat16")
        self.assertEqual(e["winner"], "one_shot:blocks=64,threads=1024")
        self.assertAlmostEqual(e["winner_us"], 5.5)
        failed = e["candidates"]["two_shot:blocks=32,threads=512"]
        self.assertFalse(failed["ok"])
        self.assertTrue(math.isinf(failed["median_us"]))
        self.assertIn("mismatch", failed["reason"])

    def test_nccl_tests(self):
        t = cg.parse_nccl_tests(NCCL_TESTS)
        self.assertEqual(sorted(t["eager"]), [8192, MiB, 256 * MiB])
        self.assertEqual(t["eager"][8192], {"us": 24.0, "bad": False})
        self.assertEqual(t["eager"][256 * MiB], {"us": 690.0, "bad": True})
        self.assertEqual(t["graph"], {8192: {"us": 20.0, "bad": False}})
        self.assertEqual(len(t["headers"]), 4)

    def test_nccl_tests_split_by_size(self):
        # bench/gpu_run.sh appends small and large sizes as separate runs,
        # each with its own header: eager, graph, eager, graph.
        lines = NCCL_TESTS.splitlines()
        eager_small, graph_small = lines[:4], lines[6:]
        eager_large = lines[:2] + lines[4:6]
        t = cg.parse_nccl_tests("\n".join(eager_small + graph_small + eager_large))
        self.assertEqual(sorted(t["eager"]), [8192, MiB, 256 * MiB])
        self.assertEqual(t["graph"], {8192: {"us": 20.0, "bad": False}})

    def test_nccl_tests_without_mode_is_eager(self):
        t = cg.parse_nccl_tests("bytes nccl_us x\n1024 3.5 1.0 (1x32)\n")
        self.assertEqual(t["eager"], {1024: {"us": 3.5, "bad": False}})
        self.assertEqual(t["graph"], {})

    def test_torch(self):
        t = cg.parse_torch(TORCH_DOC)
        self.assertEqual(t["meta"]["torch"], "2.11.0+cu130")
        self.assertEqual(t["ops"]["all_reduce/nccl"][8192]["us"], 24.0)
        self.assertIsNone(t["ops"]["all_reduce/symm_one_shot"][MiB]["us"])
        self.assertEqual(cg.parse_torch(None), {"meta": {}, "ops": {}})

    def test_values(self):
        self.assertTrue(math.isinf(cg.num("Infinity")))
        self.assertEqual(cg.intval("268435456"), 268435456)
        self.assertEqual(cg.fmt_bytes(256 * MiB), "256 MiB")
        self.assertEqual(cg.fmt_bytes(1000), "1000 B")
        self.assertEqual(cg.fmt_us(math.inf), "FAIL")
        self.assertEqual(cg.fmt_us(5.554), "5.55")
        self.assertEqual(cg.fmt_us(24.94), "24.9")
        self.assertAlmostEqual(cg.busbw_gbps(256 * MiB, 700.0), 383.479, places=2)


class FailuresTest(unittest.TestCase):
    def test_group_failures(self):
        got = cg.group_failures([
            "torch all_reduce/symm_one_shot 1 KiB: unavailable: RuntimeError: x",
            "torch all_reduce/symm_one_shot 4 KiB: unavailable: RuntimeError: x",
            "torch all_reduce/symm_one_shot 16 KiB: wrong result",
            "daemon event-loop all_reduce 8 KiB two_shot:blocks=32,threads=512: rank 1: hang",
            "daemon event-loop all_reduce 1 MiB two_shot:blocks=32,threads=512: rank 1: hang",
            "something else",
        ])
        self.assertEqual(got, [
            "torch all_reduce/symm_one_shot 1 KiB, 4 KiB: unavailable: RuntimeError: x",
            "torch all_reduce/symm_one_shot 16 KiB: wrong result",
            "daemon event-loop all_reduce 8 KiB, 1 MiB two_shot:blocks=32,threads=512: "
            "rank 1: hang",
            "something else",
        ])


class RowsTest(unittest.TestCase):
    def setUp(self):
        self.daemon = cg.merge_daemon([cg.parse_daemon_lines(daemon_allreduce_lines()),
                                       cg.parse_daemon_lines(daemon_collective_lines())])
        self.torch = cg.parse_torch(TORCH_DOC)
        self.nccl = cg.parse_nccl_tests(NCCL_TESTS)
        self.rows = {r["bytes"]: r for r in cg.allreduce_rows(
            self.daemon, self.torch, self.nccl, cg.BUILTIN_ANCHORS)}

    def test_sizes_are_the_union(self):
        self.assertEqual(sorted(self.rows), [8 * KiB, MiB, 256 * MiB])

    def test_8k(self):
        r = self.rows[8 * KiB]
        self.assertEqual(r["winner"], "one_shot:blocks=64,threads=1024")
        self.assertAlmostEqual(r["daemon_nccl_us"], 24.9)
        self.assertAlmostEqual(r["indep_nccl_us"], 24.0)
        self.assertAlmostEqual(r["indep_nccl_graph_us"], 20.0)
        self.assertAlmostEqual(r["nccl_ratio"], 24.9 / 24.0)
        self.assertTrue(r["nccl_within"])
        self.assertAlmostEqual(r["torch_best_us"], 7.5)
        self.assertAlmostEqual(r["win_vs_torch"], 5.5 / 7.5)
        self.assertEqual(r["anchor"], (24.9, 10.2, 7.8))
        self.assertAlmostEqual(r["win_vs_anchor"], 5.5 / 7.8)
        self.assertTrue(math.isinf(r["candidates"]["two_shot:blocks=32,threads=512"]))

    def test_1m(self):
        r = self.rows[MiB]
        self.assertAlmostEqual(r["nccl_ratio"], 30.0 / 24.0)
        self.assertFalse(r["nccl_within"])
        # The failed one_shot is left out of torch's best.
        self.assertAlmostEqual(r["torch_best_us"], 11.0)
        self.assertAlmostEqual(r["win_vs_torch"], 12.0 / 11.0)

    def test_256m(self):
        r = self.rows[256 * MiB]
        self.assertEqual(r["winner"], "nccl")
        self.assertAlmostEqual(r["win_vs_torch"], 700.0 / 890.0)
        self.assertAlmostEqual(r["busbw"], 256 * MiB / 700e3)
        self.assertIsNone(r["indep_nccl_graph_us"])

    def test_targets(self):
        checks = cg.target_checks(list(self.rows.values()))
        self.assertEqual([c[1] for c in checks], ["met", "NOT met", "met"])
        self.assertIn("383.5 GB/s", checks[2][2])
        self.assertIn("12.0 us", checks[1][2])

    def test_targets_of_other_worlds(self):
        # The 1 MiB and 256 MiB figures are 2-GPU targets: a 4-GPU run is
        # checked at 8 KiB only.
        checks = cg.target_checks(list(self.rows.values()), world=4)
        self.assertEqual([c[0] for c in checks], ["all_reduce bf16 8 KiB"])

    def test_graph_rows(self):
        g = cg.parse_daemon_lines(daemon_allreduce_lines(scale=0.8))
        rows = cg.graph_rows(g, self.nccl)
        self.assertEqual(len(rows), 3)
        self.assertAlmostEqual(rows[0]["nccl_ratio"], 24.9 * 0.8 / 20.0)
        self.assertIsNone(rows[1]["nccl_ratio"])

    def test_collective_rows(self):
        ag = cg.collective_rows(self.daemon, self.torch, "all_gather")
        self.assertEqual(len(ag), 1)
        self.assertEqual(ag[0]["bytes"], 64 * KiB)
        self.assertEqual(ag[0]["winner"], "p2p:blocks=32,threads=512")
        self.assertAlmostEqual(ag[0]["nccl_vs_torch"], 20.0 / 16.0)
        self.assertAlmostEqual(ag[0]["win_vs_torch"], 8.0 / 16.0)
        rs = cg.collective_rows(self.daemon, self.torch, "reduce_scatter")
        self.assertEqual(rs[0]["winner"], "nccl")
        self.assertAlmostEqual(rs[0]["nccl_vs_torch"], 22.0 / 20.0)


class MainTest(unittest.TestCase):
    def test_end_to_end(self):
        with tempfile.TemporaryDirectory() as d:
            def put(name, text):
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    f.write(text)
                return path
            ar = put("ar.jsonl", "\n".join(daemon_allreduce_lines()) + "\n")
            arg = put("arg.jsonl", "\n".join(daemon_allreduce_lines(0.8)) + "\n")
            co = put("co.jsonl", "\n".join(daemon_collective_lines()) + "\n")
            cog = put("cog.jsonl", "\n".join(daemon_collective_lines(0.25)) + "\n")
            tj = put("torch.json", json.dumps(TORCH_DOC))
            tg_doc = json.loads(json.dumps(TORCH_DOC))
            for r in tg_doc["results"]:
                if r.get("us") is not None:
                    r["us"] = r["us"] * 0.5
            tg = put("torch_graph.json", json.dumps(tg_doc))
            nt = put("nccl.txt", NCCL_TESTS)
            notes = put("steps.log", "step sweep rc=0\n")
            out = os.path.join(d, "report.md")
            rc = cg.main(["--daemon", ar, "--daemon", co, "--daemon_graph", arg,
                          "--daemon_graph", cog,
                          "--torch", tj, "--torch_graph", tg, "--nccl_tests", nt, "--anchors",
                          "--notes", notes, "--header", "HEADER TEXT",
                          "--daemon", os.path.join(d, "missing.jsonl"), "--out", out])
            self.assertEqual(rc, 0)
            with open(out) as f:
                md = f.read()
        self.assertIn("HEADER TEXT", md)
        self.assertIn("missing.jsonl: unreadable", md)
        self.assertIn("| 8 KiB | 24.9 | 7.00 | 5.50 | FAIL | one_shot:blocks=64,threads=1024 "
                      "| 5.50 | 1.5 |", md)
        self.assertIn("| 8 KiB | one_shot:blocks=64,threads=1024 | 5.50 | 24.9 | 24.0 | "
                      "1.037 ok | 20.0 | 24.0 | 10.0 | 7.50 | 0.733 | 24.9 / 10.2 / 7.8 | "
                      "0.705 |", md)
        self.assertIn("1.250 OFF", md)
        self.assertIn("| 700.0 | 690.0 BAD | 1.014 ok |", md)
        self.assertIn("CUDA-graph timing", md)
        self.assertIn("all_reduce bf16 8 KiB, event-loop timing: **met**", md)
        self.assertIn("all_reduce bf16 1 MiB, event-loop timing: **NOT met**", md)
        self.assertIn("all_reduce bf16 256 MiB, event-loop timing: **met**", md)
        self.assertIn("(eager), one run each: 2 of 3 sizes (off at 1 MiB)", md)
        self.assertNotIn("NCCL, repeated", md)  # no --nccl_repeats
        self.assertIn("| all_gather | 64 KiB | 20.0 | 8.00 | p2p:blocks=32,threads=512 |", md)
        # The other collectives: event loop against torch's NCCL, then CUDA
        # graphs against torch --graph (halved), each with its count.
        self.assertIn("| all_gather | 64 KiB | 5.00 | 2.00 | p2p:blocks=32,threads=512 | 2.00 "
                      "| 8.00 | 0.625 | 0.250 |", md)
        self.assertIn("all_gather / reduce_scatter / all_to_all / broadcast, event-loop "
                      "timing: daemon winner at or below torch's NCCL at 1 of 2 sizes (above "
                      "at reduce_scatter 64 KiB 1.100)", md)
        self.assertIn("all_gather / reduce_scatter / all_to_all / broadcast, CUDA-graph "
                      "timing: daemon winner at or below torch's NCCL at 2 of 2 sizes", md)
        self.assertIn("torch all_reduce/symm_one_shot 1 MiB: RuntimeError: boom", md)
        self.assertIn("DEADLINE_EXCEEDED", md)
        self.assertIn("p2p_bench eager NCCL 256 MiB: BAD output", md)
        self.assertIn("step sweep rc=0", md)
        # --torch_graph: torch's figures halved, beside the graph timing.
        self.assertIn("| one_shot:blocks=64,threads=1024 | 4.40 | 20.0 | 0.996 ok | 12.0 | "
                      "5.00 | 3.75 | 1.173 |", md)
        self.assertIn("under CUDA graphs on both sides: daemon winner at or below torch's "
                      "best: 0 of 3 sizes (above at 8 KiB 1.173, 1 MiB 1.745, "
                      "256 MiB 1.258)", md)
        self.assertIn("daemon winner at or below torch's best: 2 of 3 sizes (above at "
                      "1 MiB 1.091)", md)

    def test_nccl_repeats(self):
        # 8 KiB: both sides jump between ~6.5 and ~9 us from run to run (one
        # run each can differ by 40 %), but their medians agree. 1 MiB: the
        # daemon is 10 % slower in the median. 64 MiB: only the daemon ran;
        # one daemon run failed NCCL (left out), one p2p_bench run was BAD.
        daemon_8k = [9.0, 6.5, 9.1, 6.4, 9.2]
        indep_8k = [6.5, 9.0, 6.6, 9.1, 8.9]
        with tempfile.TemporaryDirectory() as d:
            rep = os.path.join(d, "nccl_repeats")
            os.mkdir(rep)
            for n in range(5):
                lines = [size_result(AR, 4096, [C_NCCL], [ranked(C_NCCL, 0, daemon_8k[n])]),
                         size_result(AR, MiB // 2, [C_NCCL], [ranked(C_NCCL, 0, 22.0)])]
                lines.append(size_result(AR, 32 * MiB, [C_NCCL], [
                    ranked(C_NCCL, 0, 250.0 + n, ok=(n != 2), reason="nccl: timeout")]))
                with open(os.path.join(rep, "daemon_nccl_%d.jsonl" % (n + 1)), "w") as f:
                    f.write("\n".join(json.dumps(m) for m in lines) + "\n")
                with open(os.path.join(rep, "indep_nccl_%d.txt" % (n + 1)), "w") as f:
                    f.write("# p2p_bench: 2 x NVIDIA H200, eager mode, NCCL only\n"
                            "       bytes        nccl_us  one_shot_us\n"
                            "        8192  %.2f  -\n"
                            "     1048576  20.00%s  -\n" % (
                                indep_8k[n], " BAD" if n == 4 else ""))
            out = os.path.join(d, "report.md")
            self.assertEqual(cg.main(["--nccl_repeats", rep, "--out", out]), 0)
            with open(out) as f:
                md = f.read()
            rows = {r["bytes"]: r for r in cg.repeat_rows(
                cg.load_nccl_repeats(rep, []))}
        self.assertIn("5 daemon runs, 5 independent runs", md)
        self.assertEqual(rows[8 * KiB]["daemon_median"], 9.0)
        self.assertEqual(rows[8 * KiB]["indep_median"], 8.9)
        self.assertTrue(rows[8 * KiB]["within"])
        self.assertEqual(len(rows[MiB]["indep"]), 4)  # the BAD run left out
        self.assertAlmostEqual(rows[MiB]["ratio"], 1.1)
        self.assertFalse(rows[MiB]["within"])
        self.assertEqual(rows[64 * MiB]["daemon"], [250.0, 251.0, 253.0, 254.0])
        self.assertIsNone(rows[64 * MiB]["within"])
        # ranked() makes mean = 1.01 x median.
        self.assertIn("| 8 KiB | 5 | 9.00 | 6.40-9.20 | 5 | 8.90 | 6.50-9.10 | 1.011 ok | "
                      "9.09 | 1.021 |", md)
        self.assertIn("| 1 MiB | 5 | 22.0 | 22.0-22.0 | 4 | 20.0 | 20.0-20.0 | 1.100 OFF | "
                      "22.2 | 1.111 |", md)
        self.assertIn("medians of the repeats: 1 of 2 sizes (off at 1 MiB)", md)

    def test_nccl_repeats_missing_folder(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "report.md")
            self.assertEqual(cg.main(["--nccl_repeats", os.path.join(d, "no"),
                                      "--out", out]), 0)
            with open(out) as f:
                self.assertIn("no such folder", f.read())

    def test_nothing_at_all(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "report.md")
            rc = cg.main(["--daemon", os.path.join(d, "none.jsonl"),
                          "--torch", os.path.join(d, "none.json"),
                          "--nccl_tests", os.path.join(d, "none.txt"), "--out", out])
            self.assertEqual(rc, 0)
            with open(out) as f:
                md = f.read()
        self.assertIn("(no daemon all_reduce results)", md)
        self.assertIn("**no data**", md)
        # The anchors alone give the comparison rows.
        self.assertIn("| 256 MiB | - | - |", md)

    def test_torch_not_json(self):
        with tempfile.TemporaryDirectory() as d:
            tj = os.path.join(d, "t.json")
            with open(tj, "w") as f:
                f.write('{"results": [')  # cut off mid-write
            out = os.path.join(d, "report.md")
            self.assertEqual(cg.main(["--torch", tj, "--out", out]), 0)
            with open(out) as f:
                self.assertIn("not JSON", f.read())

    def test_builtin_anchors_only_for_two_gpus(self):
        # The built-in anchors are 2 x H200 figures: a 4-GPU report sets
        # none beside its rows, and says why.
        daemon_lines = "\n".join(daemon_allreduce_lines()) + "\n"
        with tempfile.TemporaryDirectory() as d:
            ar = os.path.join(d, "ar.jsonl")
            with open(ar, "w") as f:
                f.write(daemon_lines)
            mds = {}
            for world in (2, 4):
                out = os.path.join(d, f"report{world}.md")
                self.assertEqual(cg.main(["--daemon", ar, "--world", str(world),
                                          "--out", out]), 0)
                with open(out) as f:
                    mds[world] = f.read()
        self.assertIn("anchors: built-in (2 x H200", mds[2])
        self.assertIn("24.9 / 10.2 / 7.8", mds[2])
        self.assertIn("anchors: none (the built-in ones are 2-GPU figures; this run has 4)",
                      mds[4])
        self.assertNotIn("24.9 / 10.2 / 7.8", mds[4])


if __name__ == "__main__":
    unittest.main()
