#!/usr/bin/env python3
"""Tests bench/tp_dynamic_gpu_report.py on canned runs of
bench/tp_dynamic_gpu.py: the side-by-side rows, the ratio told apart from
the spread or not, the winners each size ran, the dispatch table, the
graphs compiled, a wrong output named.

  python3 bench/tp_dynamic_gpu_report_test.py        (standard library only)
"""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tp_dynamic_gpu_report as rep  # noqa: E402

TABLE = [[1, 32, "tp_all_reduce_range_1_32_autotuned_all_reduce_one_shot"],
         [33, 256, "tp_all_reduce_range_33_256_autotuned_all_reduce_two_shot"],
         [257, None, "tp_all_reduce_range_257_inf_nccl"]]


def run(mode, graph, eager, ran, rel=0.01, graphs=1):
    """A result of bench/tp_dynamic_gpu.py at 8, 128 and 1024 tokens."""
    sizes = {}
    for t, g, e, r in zip(("8", "128", "1024"), graph, eager, ran):
        sizes[t] = {"graph_us": g, "eager_us": e, "max_rel_diff": rel, "compile_s": 1.0,
                    "ran": r}
    decisions = [["tp_all_reduce", {}, "tp_all_reduce_nccl", "TUNED", ""]] \
        if mode == "single" else \
        [[f"tp_all_reduce_range_{a}_{b or 'inf'}", {}, w, "CACHED", ""] for a, b, w in TABLE]
    return {"mode": mode, "timing": "cuda_graph", "world": 2, "device": "GPU X",
            "torch": "2.11.0", "date": "2026-11-26", "hidden": 4096, "layers": 4, "calls": 10,
            "reps": 15, "split_points": [32, 256] if mode == "ranges" else [],
            "sizes": sizes, "graphs": graphs, "decisions": decisions, "same_decisions": True,
            "dispatches": [["tp_all_reduce", TABLE]] * 8 if mode == "ranges" else [],
            "seconds": 60.0}


class ReportTest(unittest.TestCase):
    def report(self, runs):
        with tempfile.TemporaryDirectory() as root:
            os.mkdir(os.path.join(root, "w2"))
            for name, r in runs.items():
                with open(os.path.join(root, "w2", name), "w") as f:
                    json.dump(r, f)
            out = []
            rep.report_world(os.path.join(root, "w2"), out)
            return "\n".join(out)

    def test_side_by_side(self):
        single = ["autotuned_all_reduce_one_shot"]
        text = self.report({
            "single_1.json": run("single", (100, 300, 900), (100, 400, 1000), [single] * 3),
            "single_2.json": run("single", (102, 303, 909), (101, 404, 1010), [single] * 3),
            "ranges_1.json": run("ranges", (101, 250, 700), (130, 400, 800),
                                 [single, ["autotuned_all_reduce_two_shot"], ["nccl"]]),
            "ranges_2.json": run("ranges", (102, 252, 707), (131, 404, 808),
                                 [single, ["autotuned_all_reduce_two_shot"], ["rs_ag"]],
                                 rel=0.5, graphs=2),
        })
        # Fastest run of each mode, the ratio, the graph spreads, what ran.
        self.assertIn("| 8 | 64 KiB | 100.0 | 101.0 | 1.010 | 100.0 | 130.0 | 1.300 | "
                      "2.0 % / 1.0 % | autotuned_all_reduce_one_shot | "
                      "autotuned_all_reduce_one_shot |", text)
        self.assertIn("| 128 | 1 MiB | 300.0 | 250.0 | 0.833 | 400.0 | 400.0 | 1.000 |", text)
        self.assertIn("| 1024 | 8 MiB | 900.0 | 700.0 | 0.778 |", text)
        # Runs that ran different winners at a size: both named.
        self.assertIn("| nccl / rs_ag |", text)
        self.assertIn("CUDA graph: ranges slower than single beyond the spread: none; "
                      "faster beyond the spread: 128 (0.833), 1024 (0.778)", text)
        self.assertIn("eager: ranges slower than single beyond the spread: 8 (1.300); "
                      "faster beyond the spread: 1024 (0.800)", text)
        self.assertIn("size hint (8 tokens); ranges: split points [32, 256]", text)
        self.assertIn("ranges_2.json tokens 8 (5.00e-01)", text)
        self.assertIn("- ranges_2.json: 2 graph(s) compiled; CACHED 3; ranks agree: True; "
                      "dispatch x8: [1, 32] tp_all_reduce_range_1_32_autotuned_all_reduce_"
                      "one_shot, [33, 256] tp_all_reduce_range_33_256_autotuned_all_reduce_"
                      "two_shot, [257, inf] tp_all_reduce_range_257_inf_nccl", text)
        self.assertIn("- single_1.json: 1 graph(s) compiled; TUNED 1; ranks agree: True", text)

    def test_one_run_each_no_spread(self):
        text = self.report({
            "single_1.json": run("single", (100, 300, 900), (100, 400, 1000), [["nccl"]] * 3),
            "ranges_1.json": run("ranges", (50, 150, 450), (50, 200, 500), [["nccl"]] * 3),
        })
        # Without a spread no difference is told apart.
        self.assertIn("faster beyond the spread: none", text)
        self.assertIn("| 8 | 64 KiB | 100.0 | 50.0 | 0.500 |", text)
        self.assertIn("| - / - |", text)

    def test_missing_mode(self):
        text = self.report({"ranges_1.json": run("ranges", (1, 2, 3), (1, 2, 3),
                                                 [["nccl"]] * 3)})
        self.assertIn("| 8 | 64 KiB | - | 1.0 | - |", text)
        self.assertIn("Runs: single 0, ranges 1.", text)
        self.assertIn("(no results in", self.report({}))


if __name__ == "__main__":
    unittest.main()
