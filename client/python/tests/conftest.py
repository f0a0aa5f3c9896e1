"""Bazel's test sharding for the pytest files here: with TEST_TOTAL_SHARDS
set (a target with shard_count), shard i runs the collected tests whose
position modulo the shard count is i."""
from __future__ import annotations

import os
from typing import Any


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    total = int(os.environ.get("TEST_TOTAL_SHARDS", "1") or 1)
    if total <= 1:
        return
    index = int(os.environ.get("TEST_SHARD_INDEX", "0"))
    keep = [item for i, item in enumerate(items) if i % total == index]
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep
