"""torch.compile picks a collective's implementation by timing each one as
itself: the smallest complete example, 2 ranks on CPU (gloo) against a sim
daemon.

A custom op `quickstart::all_reduce` gets two decompositions, registered
with Inductor's register_custom_op_autotuning. autotuned.inductor.enable()
makes every choice of the op's selection (the two decompositions and the
op's own default) a candidate that the ranks run themselves: when the op is
lowered, every rank asks its daemon; the daemon has the ranks run each
choice in step (check against the first, warmup, timed iterations), takes
the slowest rank per iteration, ranks them, and every rank keeps the same
winner: the code that was timed.

Start a sim daemon on a socket of your own (docs/python.md has the
commands), then, from the repository root:

  client/python/gen_stubs.sh client/python
  AUTOTUNED_SOCKET=$dir/autotuned.sock PYTHONPATH=client/python \
      /opt/autotuned/venv/bin/python -m torch.distributed.run --standalone \
      --nproc_per_node=2 client/python/examples/inductor_quickstart.py

Rank 0 prints whether the result is right and what was decided
(autotuned.inductor.decisions()). A second run is answered from the
daemon's cache (CACHED).
"""
import datetime
import logging
import os
import sys
import tempfile

# Each rank compiles with its own empty Inductor cache, so that the example
# shows a selection on every run (a graph served from Inductor's cache makes
# none; both kinds of rank end with the same choice). One compile thread: no
# worker pool to start on a small machine. Set before torch is imported.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-quickstart-"))
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch._inductor.kernel.custom_op import CustomOpConfig, register_custom_op_autotuning  # noqa: E402

import autotuned.inductor  # noqa: E402


def main() -> int:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    group_name = dist.group.WORLD.group_name

    # The op the model calls: an all_reduce that returns a new tensor. Its
    # body is the op's default choice.
    @torch.library.custom_op("quickstart::all_reduce", mutates_args=())
    def all_reduce(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        dist.all_reduce(y)
        return y

    @all_reduce.register_fake
    def _(x):
        return torch.empty_like(x)

    # Its decompositions: traceable (functional collectives), plain Python
    # that the daemon's catalogue knows nothing about.
    c10d = torch.ops._c10d_functional

    def direct(x):
        return c10d.wait_tensor(c10d.all_reduce(x, "sum", group_name))

    def staged(x):
        return c10d.wait_tensor(c10d.all_reduce(x.clone(), "sum", group_name))

    register_custom_op_autotuning(
        all_reduce, name="quickstart_all_reduce",
        configs=[CustomOpConfig(direct), CustomOpConfig(staged)])

    # Once, after init_process_group and before compiling: it learns the
    # group here (nothing during compilation runs a collective of its own).
    # The daemon is $AUTOTUNED_SOCKET (else /run/autotuned/autotuned.sock);
    # target="unix:/path" or "host:port" names another.
    autotuned.inductor.enable()

    def model(x):
        return all_reduce(x * 2 + 1)

    # The problem: all_reduce, float32, count = 4096 elements, on `world`
    # ranks; its candidates are the choices' code, keyed by a digest of it.
    x = torch.full((4096,), float(rank + 1))
    out = torch.compile(model)(x)

    expected = sum(2.0 * (r + 1) + 1 for r in range(world))  # rank r holds r + 1
    if rank == 0:
        print(f"result correct: {bool(torch.allclose(out, torch.full_like(out, expected)))}")
        # One entry per selection, the same on every rank:
        # (selection name, {candidate: median ms}, winner, status, reason).
        for name, timings, winner, status, reason in autotuned.inductor.decisions():
            print(f"selection: {name}")
            for candidate, ms in timings.items():
                print(f"  {candidate:40s} {ms * 1000:10.1f} us")
            print(f"  winner {winner} ({status}){': ' + reason if reason else ''}")
    autotuned.inductor.disable()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)
    sys.exit(main())
