"""torch.compile picks a collective's implementation through the daemon:
the smallest complete example, 2 ranks on CPU (gloo) against a sim daemon.

A custom op `quickstart::all_reduce` gets three decompositions, registered
with Inductor's register_custom_op_autotuning. autotuned.inductor.enable maps
each decomposition function to a daemon implementation (`impls`); when the
op is lowered, every rank asks its daemon, the daemon times those
implementations once for the whole group, and Inductor keeps the
decomposition of the daemon's winner on every rank. Here all three
decompositions compute the same sum (a functional all_reduce; this is CPU):
what the daemon measures is what each one stands for, its sim backend's
all_reduce/one_shot, two_shot and ring.

Start a sim daemon on a socket of your own (docs/python.md has the
commands), then, from the repository root:

  client/python/gen_stubs.sh client/python
  AUTOTUNED_SOCKET=$dir/autotuned.sock PYTHONPATH=client/python \
      /opt/autotuned/venv/bin/python -m torch.distributed.run --standalone \
      --nproc_per_node=2 client/python/examples/inductor_quickstart.py

Rank 0 prints whether the result is right and what the daemon decided
(autotuned.inductor.decisions()). A second run is answered from the
daemon's cache (CACHED).
"""
import datetime
import logging
import os
import sys
import tempfile

# Each rank compiles with its own empty Inductor cache, so that every rank
# lowers the op, and so asks the daemon, alike (ranks sharing Inductor's
# on-disk caches can find them in different states). One compile thread: no
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

    # The op the model calls: an all_reduce that returns a new tensor.
    @torch.library.custom_op("quickstart::all_reduce", mutates_args=())
    def all_reduce(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        dist.all_reduce(y)
        return y

    @all_reduce.register_fake
    def _(x):
        return torch.empty_like(x)

    # Its decompositions: traceable (functional collectives), one per daemon
    # implementation they stand for.
    def reduce(x):
        c10d = torch.ops._c10d_functional
        return c10d.wait_tensor(c10d.all_reduce(x, "sum", group_name))

    def one_shot(x):
        return reduce(x)

    def two_shot(x):
        return reduce(x)

    def ring(x):
        return reduce(x)

    register_custom_op_autotuning(
        all_reduce, name="quickstart_all_reduce",
        configs=[CustomOpConfig(one_shot), CustomOpConfig(two_shot), CustomOpConfig(ring)])

    # The keys of `impls` are the decomposition functions (or their names);
    # the values are the daemon's implementation names (`autotunectl list`).
    # The daemon is $AUTOTUNED_SOCKET (else /run/autotuned/autotuned.sock);
    # target="unix:/path" or "host:port" names another.
    autotuned.inductor.enable(impls={one_shot: "all_reduce/one_shot",
                                     two_shot: "all_reduce/two_shot",
                                     ring: "all_reduce/ring"})

    def model(x):
        return all_reduce(x) * 2

    # The problem the daemon measures comes from the op's first tensor input:
    # all_reduce, float32, count = 4096 elements, on `world` ranks.
    x = torch.full((4096,), float(rank + 1))
    out = torch.compile(model)(x)

    expected = 2.0 * world * (world + 1) / 2  # rank r holds r + 1
    if rank == 0:
        print(f"result correct: {bool(torch.allclose(out, torch.full_like(out, expected)))}")
        # One entry per daemon-timed selection, the same on every rank:
        # (selection name, {candidate: median ms}, winner, status, reason).
        for name, timings, winner, status, reason in autotuned.inductor.decisions():
            print(f"selection: {name}")
            for impl, ms in timings.items():
                print(f"  {impl:32s} {ms * 1000:8.1f} us")
            print(f"  winner {winner} ({status}){': ' + reason if reason else ''}")
    autotuned.inductor.disable()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)
    sys.exit(main())
