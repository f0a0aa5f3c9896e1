"""autotuned.kernels' torch side without a GPU: the ops' schemas and fake
implementations (what torch.compile traces), and the Dispatcher running a
dispatch table's picks through the ops on 2 gloo ranks ("all_reduce/nccl"
is torch.distributed's collective, which gloo runs on CPU). The P2P path
itself needs GPUs: tests/gpu_kernels_test.py.
"""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from ranks import RankError, run_ranks  # noqa: E402
from timeout_guard import guard  # noqa: E402


@pytest.fixture(autouse=True)
def deadline():
    with guard(240):
        yield


class _FakeGroup:
    world = 4
    process_group = None


def test_schemas_and_fake_shapes():
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    import autotuned.kernels as K

    assert str(torch.ops.autotuned.all_reduce.default._schema) == (
        'autotuned::all_reduce(Tensor x, str impl, str group="", int blocks=0, int threads=0, '
        'int chunk_kib=0, str op="sum") -> Tensor')
    K.register_group("fake4", _FakeGroup())
    with FakeTensorMode():
        x = torch.empty(8, 3, dtype=torch.bfloat16)
        assert torch.ops.autotuned.all_reduce(x, "all_reduce/one_shot", "fake4").shape == (8, 3)
        assert torch.ops.autotuned.all_gather(x, "all_gather/p2p", "fake4").shape == (32, 3)
        y = torch.ops.autotuned.reduce_scatter(x, "reduce_scatter/p2p", "fake4")
        assert y.shape == (2, 3) and y.dtype == torch.bfloat16
    with pytest.raises(K.KernelsError, match="no P2PGroup named 'nope'"):
        K.get_group("nope")


def test_make_fx_traces_the_ops():
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    import autotuned.kernels as K

    K.register_group("fake4", _FakeGroup())

    def f(x):
        y = torch.ops.autotuned.all_reduce(x * 2, "all_reduce/two_shot", "fake4", 16, 256)
        return torch.ops.autotuned.all_gather(y, "all_gather/p2p", "fake4")

    gm = make_fx(f, tracing_mode="fake")(torch.ones(5, 2))
    targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert "autotuned.all_reduce.default" in targets
    assert "autotuned.all_gather.default" in targets


def dispatch_on_gloo(rank, world):
    import torch
    import torch.distributed as dist

    import autotuned.kernels as K
    from autotuned.vllm import DispatchTable, SizeTiming

    out = {}
    cands = ["all_reduce/nccl", "all_reduce/ring"]
    table = DispatchTable("all_reduce", "float32", world, cands, [
        SizeTiming(16, 64, cands[0], 0, {}, "TUNED"),
        SizeTiming(1 << 16, 1 << 18, cands[1], 1, {}, "TUNED")], [])

    ring_calls = []

    def ring(x):  # a caller's own implementation for a name the ops do not run
        ring_calls.append(x.numel())
        y = x.clone()
        dist.all_reduce(y)
        return y

    run = table.runner(None, others={"all_reduce/ring": ring})
    assert isinstance(run, K.Dispatcher)
    small = torch.full((10,), float(rank + 1))
    big = torch.full((70000,), float(rank + 1))
    out["picks"] = (run.pick(small), run.pick(big))
    out["small"] = run(small)[0].item()
    out["big"] = run(big)[-1].item()
    out["ring_calls"] = list(ring_calls)
    out["small_unchanged"] = small[0].item()

    # torch.compile through the op (the NCCL pick) and its fake implementation.
    compiled = torch.compile(lambda x: run(x * 2) + 1, fullgraph=True, backend="aot_eager")
    out["compiled"] = compiled(small)[3].item()

    # A P2P candidate without a P2PGroup is refused when the runner is made.
    try:
        DispatchTable("all_reduce", "float32", world, ["all_reduce/one_shot"], [], []).runner()
        out["p2p_without_group"] = "accepted"
    except K.KernelsError as e:
        out["p2p_without_group"] = str(e)
    # ... unless it wins no size (ruled out, e.g. on one rank): then the
    # runner is made, and only calling that candidate says why it cannot run.
    from autotuned.vllm import SizeTiming
    nccl_wins = [SizeTiming(count=16, bytes=64, winner="all_reduce/nccl", winner_index=0,
                            median_us={"all_reduce/nccl": 5.0,
                                       "all_reduce/one_shot": float("inf")},
                            status="TUNED")]
    only_nccl = DispatchTable("all_reduce", "float32", world,
                              ["all_reduce/nccl", "all_reduce/one_shot"], nccl_wins, []).runner()
    out["nccl_winner"] = only_nccl(torch.full((16,), float(rank + 1)))[0].item()
    try:
        only_nccl._runs[1](small)
        out["non_winner"] = "ran"
    except K.KernelsError as e:
        out["non_winner"] = str(e)
    # An implementation the ops do not know, without `others`, likewise.
    try:
        table.runner()
        out["unknown"] = "accepted"
    except K.KernelsError as e:
        out["unknown"] = str(e)

    # A P2PGroup needs CUDA: a clear error on every rank, no hang.
    if not torch.cuda.is_available():
        try:
            K.P2PGroup(None, library=os.environ.get(K.LIB_ENV) or None)
            out["p2p_group"] = "made"
        except K.KernelsError as e:
            out["p2p_group"] = str(e)
    return out


def test_dispatcher_on_gloo():
    a, b = run_ranks(dispatch_on_gloo, timeout=200)
    assert not isinstance(a, RankError), a
    assert not isinstance(b, RankError), b
    for r in (a, b):
        assert r["picks"] == ("all_reduce/nccl", "all_reduce/ring")
        assert r["small"] == 3.0 and r["big"] == 3.0
        assert r["ring_calls"] == [70000]
        assert r["small_unchanged"] in (1.0, 2.0)     # the op returns a new tensor
        assert r["compiled"] == 7.0                    # (1*2 + 2*2) + 1
        assert "runs on the P2P kernels: pass a P2PGroup" in r["p2p_without_group"]
        assert r["nccl_winner"] == 3.0
        assert "wins no size of the table" in r["non_winner"]
        assert "'all_reduce/ring' does not run in-process" in r["unknown"]
        if "p2p_group" in r:
            assert r["p2p_group"] == "P2PGroup: no CUDA device"


def test_dispatcher_sends_what_a_candidate_cannot_hold_to_nccl():
    # The push one-shot runs up to the group's push_max_bytes, the copy
    # engine up to ce_max_bytes, the other P2P kernels up to max_bytes;
    # beyond, torch.distributed's collective. pick() launches nothing, so a
    # stand-in for the group (its limits) will do.
    import types

    import torch

    import autotuned.kernels as K
    from autotuned.vllm import DispatchTable, SizeTiming

    cands = ["all_reduce/one_shot_push:blocks=16,threads=512", "all_reduce/one_shot",
             "all_reduce/copy_engine:chunk_kib=1024"]
    table = DispatchTable("all_reduce", "bfloat16", 2, cands, [
        SizeTiming(1 << 10, 2 << 10, cands[0], 0, {}, "TUNED"),
        SizeTiming(1 << 20, 2 << 20, cands[1], 1, {}, "TUNED"),
        SizeTiming(1 << 24, 32 << 20, cands[2], 2, {}, "TUNED")], [])
    group = types.SimpleNamespace(name="stand-in", max_bytes=64 << 20, push_max_bytes=8 << 10,
                                  ce_max_bytes=16 << 20)
    run = K.Dispatcher(table, group)

    def pick(elements):
        return run.pick(torch.empty(elements, dtype=torch.bfloat16))

    assert pick(1 << 10) == cands[0]             # 2 KiB: the push one-shot
    assert pick(1 << 12) == cands[0]             # 8 KiB: its buffer's largest
    assert pick(1 << 13) == "all_reduce/nccl"    # 16 KiB: nearer the push pick, too large
    assert pick(1 << 19) == cands[1]             # 1 MiB: the one-shot
    assert pick(1 << 23) == cands[2]             # 16 MiB: the copy engine
    assert pick(1 << 24) == "all_reduce/nccl"    # 32 MiB: over ce_max_bytes
    assert pick(1 << 26) == "all_reduce/nccl"    # 128 MiB: over max_bytes too


@pytest.fixture
def one_rank_group(tmp_path):
    """The default process group: this process alone, on gloo."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


def test_nccl_only_dispatcher_releases_its_group(one_rank_group):
    # Without a P2PGroup, a Dispatcher registers a group of its own for the
    # ops to find; it must go with the Dispatcher, made or refused.
    import gc

    import torch

    import autotuned.kernels as K
    from autotuned.vllm import DispatchTable, SizeTiming

    cands = ["all_reduce/nccl"]
    table = DispatchTable("all_reduce", "float32", 1, cands,
                          [SizeTiming(16, 64, cands[0], 0, {}, "TUNED")], [])
    before = K.group_names()
    run = table.runner()
    mine = [n for n in K.group_names() if n not in before]
    assert len(mine) == 1 and mine[0].startswith("nccl-only:"), K.group_names()
    assert run(torch.ones(4))[0].item() == 1.0
    del run
    assert K.group_names() == before             # dropped: released at once
    for _ in range(20):
        table.runner()(torch.ones(4))
    with pytest.raises(K.KernelsError, match="pass a P2PGroup"):
        DispatchTable("all_reduce", "float32", 1, ["all_reduce/one_shot"], [], []).runner()
    gc.collect()
    assert K.group_names() == before             # made and dropped, or refused: none left
    run = table.runner()
    run.close()
    assert K.group_names() == before             # closed while still referenced
    with pytest.raises(K.KernelsError, match="no P2PGroup named 'nccl-only:"):
        run(torch.ones(4))


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-p", "no:cacheprovider"]))
