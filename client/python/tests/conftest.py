"""What the pytest files here share (shipped with //client/python:daemon_fixture):

- Bazel's test sharding: with TEST_TOTAL_SHARDS set (a target with
  shard_count), shard i runs the collected tests whose position modulo the
  shard count is i;
- the `daemon` fixture: a sim daemon on its defaults for each test, stopped
  after it (a file that needs another configuration or scope defines its
  own, which takes precedence);
- the `wide_daemon` fixture: the same with a pre-sync window cap of
  WIDE_WINDOW_US, for cases whose 4 ranks compile side by side on 2 busy
  cores and can reach their first selection more than the default cap's
  10 s apart (their ranks ask with that window: a round starts as soon as
  every rank is there, so a wide window costs a case that passes nothing).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_fixture import WIDE_WINDOW_US, Daemon  # noqa: E402


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    d = Daemon()
    yield d
    d.stop()


@pytest.fixture
def wide_daemon() -> Iterator[Daemon]:
    d = Daemon(config_text=f"limits {{ max_presync_window_us: {WIDE_WINDOW_US} }}")
    yield d
    d.stop()


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    total = int(os.environ.get("TEST_TOTAL_SHARDS", "1") or 1)
    if total <= 1:
        return
    index = int(os.environ.get("TEST_SHARD_INDEX", "0"))
    keep = [item for i, item in enumerate(items) if i % total == index]
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep
