"""autotuned.inductor's functional collectives under DTensor tensor
parallelism: gloo, CPU, a sim daemon.

A Linear-GELU-Linear MLP parallelized with parallelize_module
(ColwiseParallel for the first Linear, RowwiseParallel for the second) on a
one-dimensional DeviceMesh("cpu", ...), compiled with torch.compile after
autotuned.inductor.enable(), a training step (forward and backward) on one
token (a decode shape: the first dimension is not a multiple of the group's
size). DTensor's redistribute traces to the in-place
_c10d_functional.all_reduce_ on a view of the matmul's output: the partial
sum of the RowwiseParallel output in the forward graph, the gradient of the
ColwiseParallel input in the backward graph:

  * the forward's all_reduce is a selection the daemon answers (TUNED, both
    candidates timed: Inductor's lowering and reduce_scatter/all_gather of
    the flattened input), the backward's the same problem (CACHED), the
    same decisions on every rank, the output and the gradients those of
    the uncompiled DTensor model within float32 rounding;
  * a second compile in a fresh Inductor cache is answered CACHED; with the
    other choice compiled in (visible in the generated code), the same
    output and gradients;
  * the daemon SIGKILLed: every all_reduce falls back to Inductor's own
    lowering on every rank, the right output.

The long twin (//client/python:inductor_dtensor_long_test) adds sequence
parallelism (Shard(1) around the MLP): DTensor's all_gather and
reduce_scatter tuned, forward and backward, the same output and gradients.
"""

import os
import signal
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from ranks import RankError, run_ranks  # noqa: E402
from recording import graph_runs  # noqa: E402
from relowering import relowering, shared  # noqa: E402
from tier import LONG, long_only  # noqa: E402
from timeout_guard import guard  # noqa: E402

WINDOW_US = 10_000_000  # ranks compiling side by side on a busy machine drift apart
# Batch, tokens, hidden: one token (Inductor makes the matmul of one row a
# pointwise kernel, so the all_reduce_'s input is a view of a buffer not yet
# realized); sequence parallelism shards four tokens.
SHAPE = (1, 1, 8)
SP_SHAPE = (1, 4, 8)


@pytest.fixture(autouse=True)
def deadline():
    with guard(1200 if LONG else 600):
        yield


def _model(world, sequence_parallel):
    """The MLP, its parameters the same on every rank, parallelized."""
    import torch
    from torch import nn
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(SHAPE[-1], 4 * SHAPE[-1])
            self.act = nn.GELU()
            self.down = nn.Linear(4 * SHAPE[-1], SHAPE[-1])

        def forward(self, x):
            return self.down(self.act(self.up(x)))

    torch.manual_seed(0)
    mlp = MLP()
    if sequence_parallel:
        plan = {"up": ColwiseParallel(input_layouts=Shard(1)),
                "down": RowwiseParallel(output_layouts=Shard(1))}
    else:
        plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
    return parallelize_module(mlp, DeviceMesh("cpu", list(range(world))), plan)


def _step(model, x, backward):
    """The output and the gradients (the input's, then each weight's shard)."""
    x = x.clone().requires_grad_(backward)
    out = model(x)
    if not backward:
        return [out.detach()]
    out.sum().backward()
    return [out.detach(), x.grad] + [p.grad.to_local() for p in (model.up.weight,
                                                                  model.down.weight)]


def _steps(rank, world, target, plan):
    """Enables the integration and compiles a fresh copy of the model once
    per step, each lowered afresh (relowering.py: the kernels shared); what
    each step saw."""
    import time

    import torch
    import torch.distributed as dist

    import autotuned.inductor as ai
    from autotuned import pb
    from autotuned.inductor import _select

    sp = plan.get("sequence_parallel", False)
    torch.manual_seed(1)
    x = torch.randn(*(SP_SHAPE if sp else SHAPE))
    if sp:
        x = x.chunk(world, dim=1)[rank].contiguous()
    expected = {b: _step(_model(world, sp), x, b) for b in (False, True)}

    codes = []
    undo_graph_runs = graph_runs(codes)
    original_ask = _select.ask
    force = [False]

    def ask(state, selections, *args, **kwargs):
        answers = original_ask(state, selections, *args, **kwargs)
        # The decision stays the daemon's; the code compiled is the other choice.
        return [(s.choices[1], t) for s, (_, t) in zip(selections, answers)] if force[0] \
            else answers
    _select.ask = ask

    ai.enable(target=target, timeout=300,
              options=pb.Options(warmup=1, iterations=5, presync_window_us=WINDOW_US))
    out = []
    for step in plan["steps"]:
        if step.get("kill_daemon_pid") and rank == 0:
            os.kill(step["kill_daemon_pid"], signal.SIGKILL)
        force[0] = step.get("force_other", False)
        backward = not step.get("forward_only", False)
        dist.barrier()
        torch._dynamo.reset()
        before, first_code = len(ai.decisions()), len(codes)
        start = time.monotonic()
        with relowering():
            result = _step(torch.compile(_model(world, sp)), x, backward)
        # float32 rounding: Inductor's fused GELU and bias are not eager's.
        close = [bool(torch.allclose(r, e, rtol=1e-5, atol=1e-6))
                 for r, e in zip(result, expected[backward])]
        out.append({"decisions": ai.decisions()[before:], "codes": codes[first_code:],
                    "wall_s": time.monotonic() - start, "close": close,
                    "outputs": len(result)})
    ai.disable()
    _select.ask = original_ask
    undo_graph_runs()
    return out


def _run(daemon, plan):
    env = {"TORCHINDUCTOR_CACHE_DIR": shared(),
           # One compile thread: no worker pool to start on a small, busy machine.
           "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    results = run_ranks(_steps, world=2, args=(daemon.target, plan), env=env,
                        timeout=900 if LONG else 400)
    for r in results:
        assert not isinstance(r, RankError), r
    for i, step in enumerate(plan["steps"]):
        for r in results:
            # (selection, {candidate: ms}, winner, status): the same on every rank.
            assert [d[:4] for d in r[i]["decisions"]] == \
                [d[:4] for d in results[0][i]["decisions"]], (results[0][i], r[i])
            assert r[i]["outputs"] == (1 if step.get("forward_only") else 4), r[i]
            assert all(r[i]["close"]), r[i]
    return results[0]


def _both_timed(step):
    for name, timings, winner, _status, _why in step["decisions"]:
        # Inductor's own lowering and the alternative, each timed as itself.
        assert len(timings) == 2 and f"{name}_default" in timings, timings
        assert winner in timings, timings
        assert all(0 < ms < 1000 for ms in timings.values()), timings


def test_tensor_parallel_mlp_tuned_cached_and_dead_daemon(daemon):
    """The forward's all_reduce TUNED, the backward's CACHED, the eager
    output and gradients; a second compile CACHED with the alternative
    compiled in, the same output and gradients; the daemon killed: the
    default on every rank, the right output."""
    tuned, forced, dead = _run(daemon, {"steps": [
        {}, {"force_other": True},
        {"kill_daemon_pid": daemon.proc.pid, "forward_only": True}]})
    names = ["functional_all_reduce", "functional_all_reduce_1"]
    assert [(d[0], d[3]) for d in tuned["decisions"]] == \
        [(names[0], "TUNED"), (names[1], "CACHED")], tuned
    _both_timed(tuned)
    assert all(f"{n}_reduce_scatter_all_gather_flat" in d[1]
               for n, d in zip(names, tuned["decisions"])), tuned["decisions"]
    assert [(d[0], d[3]) for d in forced["decisions"]] == [(n, "CACHED") for n in names]
    assert [d[1] for d in forced["decisions"]] == [d[1] for d in tuned["decisions"]]
    code = "\n".join(forced["codes"])
    assert code.count("reduce_scatter_tensor.default(") == 2, code
    assert [(d[0], d[2], d[3]) for d in dead["decisions"]] == \
        [(names[0], f"{names[0]}_default", "FALLBACK")], dead
    assert "reduce_scatter_tensor" not in "\n".join(dead["codes"])


@long_only("//client/python:inductor_dtensor_long_test")
def test_sequence_parallel_mlp(daemon):
    """Shard(1) in and out: DTensor's all_gather and reduce_scatter, forward
    and backward, each TUNED then CACHED, the eager output and gradients;
    the alternatives compiled in give the same."""
    tuned, forced = _run(daemon, {"sequence_parallel": True,
                                  "steps": [{}, {"force_other": True}]})
    names = ["functional_all_gather_into_tensor", "functional_reduce_scatter_tensor",
             "functional_all_gather_into_tensor_1", "functional_reduce_scatter_tensor_1"]
    assert [(d[0], d[3]) for d in tuned["decisions"]] == \
        [(n, "TUNED" if i < 2 else "CACHED") for i, n in enumerate(names)], tuned
    _both_timed(tuned)
    assert [(d[0], d[3]) for d in forced["decisions"]] == [(n, "CACHED") for n in names]
    assert "all_to_all_single" in "\n".join(forced["codes"])


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-p", "no:cacheprovider"]))
