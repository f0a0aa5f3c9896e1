"""The test tiers: the default one runs in `bazel test`; the long one
(AUTOTUNED_LONG=1, set by the manual-tagged *_long_test twins in BUILD) adds
the slow cases: more ranks, the second path of a failure already covered
once, the same failure seen through another layer.

    @long_only("//client/python:inductor_long_test")
    def test_four_ranks(...): ...
"""
from __future__ import annotations

import os
from typing import Any

import pytest

LONG = os.environ.get("AUTOTUNED_LONG", "") == "1"


def long_only(target: str) -> Any:
    """Skips the test outside the long tier, naming the target that runs it."""
    return pytest.mark.skipif(not LONG, reason=f"long tier: bazel test {target} "
                                               "(or AUTOTUNED_LONG=1)")
