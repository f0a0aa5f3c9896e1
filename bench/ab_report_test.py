#!/usr/bin/env python3
"""Tests bench/ab_report.py on synthetic sweeps (standard library only)."""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ab_report  # noqa: E402


def size_result(count, rows, timed_by="EVENT_LOOP"):
    ranked = [{"candidate": {"impl": f"all_reduce/{impl}", "params": {}}, "ok": ok,
               "median_us": us, "timed_by": timed_by} for impl, us, ok in rows]
    return {"size_result": {"problem": {"collective": "ALL_REDUCE", "dtype": "BFLOAT16",
                                        "count": str(count)}, "ranked": ranked}}


class AbReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, lines):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write("\n".join(json.dumps(x) for x in lines) + "\n")
        return path

    def run_report(self, *argv):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = ab_report.main(list(argv))
        return rc, out.getvalue()

    def test_ratios_lowest_over_repeats_and_modes_apart(self):
        a1 = self.write("a1", [size_result(4096, [("nccl", 20.0, True), ("one_shot", 10.0, True)]),
                               size_result(4096, [("nccl", 15.0, True)], "CUDA_GRAPH")])
        a2 = self.write("a2", [size_result(4096, [("nccl", 19.0, True), ("one_shot", 11.0, True)])])
        b = self.write("b", [size_result(4096, [("nccl", 19.0, True), ("one_shot", 8.0, True),
                                                ("two_shot", 1.0, False)]),
                             size_result(1 << 20, [("nccl", 50.0, True)]),
                             size_result(4096, [("nccl", 12.0, True)], "CUDA_GRAPH")])
        torch = os.path.join(self.dir.name, "torch.json")
        with open(torch, "w") as f:
            json.dump({"results": [{"op": "all_reduce/nccl", "bytes": 8192, "us": 16.0, "ok": True},
                                   {"op": "all_reduce/symm_two_shot", "bytes": 8192, "us": 12.5,
                                    "ok": True},
                                   {"op": "all_gather/nccl", "bytes": 8192, "us": 1.0, "ok": True}]}, f)
        rc, text = self.run_report("--a", a1, a2, "--b", b, "--names", "off", "on", "--torch", torch)
        self.assertEqual(rc, 0)
        # Event loop: A's winner 10.0 (lowest of its repeats), B's 8.0 (the
        # failed two_shot left out); torch best 12.5 (all_reduce ops only).
        self.assertIn("| 8 KiB | 10.0 | 8.0 | 0.800 | 12.5 | 0.800 | 0.640 "
                      "| nccl 1.000, one_shot 0.800 |", text)
        self.assertNotIn("1 MiB", text)  # measured on one side only
        graph = text[text.index("## CUDA_GRAPH"):]
        self.assertIn("| 8 KiB | 15.0 | 12.0 | 0.800 | - | - | - | nccl 0.800 |", graph)

    def test_nothing_in_common_fails(self):
        a = self.write("a", [size_result(4096, [("nccl", 20.0, True)])])
        b = self.write("b", [size_result(4096, [("nccl", 20.0, True)], "CUDA_GRAPH")])
        rc, _ = self.run_report("--a", a, "--b", b)
        self.assertEqual(rc, 1)


if __name__ == "__main__":
    unittest.main()
