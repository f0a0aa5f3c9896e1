"""bench/vllm_table_report.py's ranges check on a table the vLLM helper saved
on 2 x H200 (bench/results/vllm_table_h200x2_2026-11-27_nccl_in_ranks): it
passes as saved, and fails once a range names a candidate that is measurably
slower inside it."""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vllm_table_report as vt  # noqa: E402

TABLE = os.path.join(HERE, "results", "vllm_table_h200x2_2026-11-27_nccl_in_ranks",
                     "vllm2.jsonl")


class RangesCheckTest(unittest.TestCase):
    def test_saved_table_passes(self):
        self.assertEqual(vt.slower_in_ranges(TABLE), [])

    def test_a_slower_pick_fails(self):
        # 4 KiB..128 KiB given to all_reduce/one_shot 32x512 (index 1),
        # measurably slower there than the push one-shot.
        with open(TABLE) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        for d in lines:
            if "table" in d:
                d["table"]["ranges"][1]["winner_index"] = 1
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.jsonl")
            with open(path, "w") as f:
                f.write("\n".join(json.dumps(d) for d in lines) + "\n")
            slower = vt.slower_in_ranges(path)
        self.assertEqual(len(slower), 6)
        self.assertIn("count 2048", slower[0])

    def test_read_table(self):
        figures, winner = vt.read_table(TABLE)
        self.assertEqual(figures["all_reduce/nccl"][1024][1], "CUDA_GRAPH")
        self.assertEqual(winner[1024][1], "all_reduce/one_shot_push")


if __name__ == "__main__":
    unittest.main()
