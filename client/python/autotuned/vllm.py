"""A dispatch table for one tensor-parallel group, made once at worker startup.

    from autotuned.vllm import tune_dispatch
    table = tune_dispatch(tp_group, collective="all_reduce", dtype=torch.bfloat16,
                          candidates=["all_reduce/nccl", "all_reduce/one_shot",
                                      "all_reduce/two_shot"])
    impl = table.pick(x)          # e.g. "all_reduce/one_shot" for this tensor's size
    i = table.pick_index(x)       # its position in `candidates`

    # Run the winner itself, in this process (autotuned.kernels):
    p2p = autotuned.kernels.P2PGroup(tp_group)   # CUDA IPC peer buffers
    all_reduce = table.runner(p2p)
    y = all_reduce(x)             # the kernel the daemon measured, on x's size

Collective over the group: every rank calls it once, and every rank gets the
same table (one per-rank Sweep, agreed through the group; see
autotuned.group). Where the daemon is absent or fails on any rank, every rank
gets the same fallback table: the first candidate at every size, with
`fallback` True and the reason.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Optional, Union

from autotuned._proto import autotuned_pb2 as pb
from autotuned.client import (
    CandidateLike,
    Client,
    candidate,
    candidate_spec,
    collective_enum,
    dtype_bytes,
    dtype_enum,
    problem,
)
from autotuned.dispatch import Dispatcher, nearest_winner
from autotuned.group import GroupDescription, ask_agreed, describe_group, with_presync

# 1 KiB .. 64 MiB per rank, powers of two.
DEFAULT_SIZES_BYTES = tuple(1 << s for s in range(10, 27))


@dataclasses.dataclass(frozen=True)
class SizeTiming:
    """One measured size: the winner and every candidate's median, in us."""

    count: int
    bytes: int
    winner: str                      # candidate spec
    winner_index: int
    median_us: dict[str, float]      # candidate spec -> median (inf when ruled out)
    status: str                      # TUNED, CACHED, FALLBACK, FAILED


@dataclasses.dataclass(frozen=True)
class SizeRange:
    """Consecutive measured sizes with the same winner (bounds inclusive)."""

    min_count: int
    max_count: int
    min_bytes: int
    max_bytes: int
    winner: str
    winner_index: int
    winner_us: tuple[float, ...]     # the winner's median at each size of the range


@dataclasses.dataclass
class DispatchTable:
    """Size -> implementation for one collective and dtype; the same on every rank."""

    collective: str
    dtype: str
    world_size: int
    candidates: list[str]
    sizes: list[SizeTiming]
    ranges: list[SizeRange]
    fallback: bool = False
    reason: str = ""
    # The daemon's answer per size, as received (synthesized FALLBACK ones
    # for a fallback table); left out of comparisons.
    results: list[pb.ProblemResult] = dataclasses.field(default_factory=list, compare=False,
                                                        repr=False)

    def count_of(self, tensor_or_count: Union[int, Any]) -> int:
        """The per-rank `count` of a tensor as the daemon measured it: numel
        for all_reduce, all_gather and broadcast inputs; numel / world_size
        for reduce_scatter and all_to_all inputs."""
        if isinstance(tensor_or_count, int):
            return tensor_or_count
        n = int(tensor_or_count.numel())
        if self.collective in ("reduce_scatter", "all_to_all"):
            n //= self.world_size
        return n

    def pick_index(self, tensor_or_count: Union[int, Any]) -> int:
        """Index in `candidates` of the implementation for this size: the
        winner at the nearest measured size (log scale); below the smallest
        and above the largest measured size, the winner there."""
        if not self.sizes:
            return 0
        return nearest_winner([s.count for s in self.sizes],
                              [s.winner_index for s in self.sizes],
                              self.count_of(tensor_or_count))

    def pick(self, tensor_or_count: Union[int, Any]) -> str:
        """The candidate spec (e.g. "all_reduce/one_shot") for this size."""
        return self.candidates[self.pick_index(tensor_or_count)]

    def runner(self, p2p: Any = None, *, op: str = "sum",
               others: Optional[dict] = None, process_group: Any = None) -> Any:
        """A callable x -> Tensor running this table's pick for x: the daemon's
        implementation itself, as a torch op of autotuned.kernels (P2P kernels
        through `p2p`, an autotuned.kernels.P2PGroup; "<collective>/nccl"
        through torch.distributed). `others` maps candidate specs or names to
        the caller's own callables. See autotuned.dispatch.Dispatcher."""
        return Dispatcher(self, p2p, op=op, others=others, process_group=process_group)

    def write_jsonl(self, path: str) -> None:
        """Writes the per-size results as `autotunectl --json sweep` prints them (one
        SweepUpdate per line), so that `autotunectl plot --input=PATH
        --plot=FILE.png` draws the table: latency against size per candidate,
        each size's winner marked."""
        from google.protobuf import json_format

        with open(path, "w") as f:
            for r in self.results:
                update = pb.SweepUpdate(size_result=r)
                f.write(json_format.MessageToJson(update, indent=None,
                                                  preserving_proto_field_name=True) + "\n")

    def format(self) -> str:
        """The table as text: one line per range, then one per size."""
        head = f"{self.collective} {self.dtype} world_size={self.world_size}"
        if self.fallback:
            head += f" FALLBACK ({self.reason})"
        lines = [head]
        for r in self.ranges:
            us = ", ".join(f"{t:.1f}" for t in r.winner_us)
            lines.append(f"  {_human(r.min_bytes)}..{_human(r.max_bytes)} -> {r.winner}"
                         + (f"  [{us}] us" if us else ""))
        for s in self.sizes:
            others = "  ".join(f"{k}={v:.1f}" for k, v in s.median_us.items())
            lines.append(f"    {_human(s.bytes):>8} {s.status:<8} {s.winner:<28} {others}")
        return "\n".join(lines)


def _human(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n}B"


def _dtype_name(dtype: object) -> str:
    return pb.DType.Name(dtype_enum(dtype)).lower()


def _table(collective: str, dtype: object, world: int, specs: list[str],
           results: Sequence[pb.ProblemResult]) -> DispatchTable:
    size = dtype_bytes(dtype)
    sizes = []
    for r in results:
        # By position: the daemon names candidates canonically (defaults
        # filled in, "all_reduce/ring:chunk_kib=256"), the caller maybe not.
        med = {specs[c.index]: (c.median_us if c.ok else math.inf) for c in r.ranked
               if 0 <= c.index < len(specs)}
        sizes.append(SizeTiming(count=r.problem.count, bytes=r.problem.count * size,
                                winner=specs[r.winner_index], winner_index=r.winner_index,
                                median_us={s: med.get(s, math.inf) for s in specs},
                                status=pb.DecisionStatus.Name(r.status)))
    ranges: list[SizeRange] = []
    for s in sizes:
        us = s.median_us[s.winner]
        if ranges and ranges[-1].winner_index == s.winner_index:
            last = ranges[-1]
            ranges[-1] = dataclasses.replace(last, max_count=s.count, max_bytes=s.bytes,
                                             winner_us=last.winner_us + (us,))
        else:
            ranges.append(SizeRange(s.count, s.count, s.bytes, s.bytes, s.winner,
                                    s.winner_index, (us,)))
    return DispatchTable(collective, _dtype_name(dtype), world, specs, sizes, ranges,
                         results=list(results))


def tune_dispatch(process_group: Any = None, *, candidates: Sequence[CandidateLike],
                  collective: str = "all_reduce", dtype: object = "bfloat16",
                  sizes_bytes: Sequence[int] = DEFAULT_SIZES_BYTES,
                  desc: Optional[GroupDescription] = None, op: str = "sum",
                  options: Optional[pb.Options] = None, timeout: float = 600.0,
                  on_unavailable: str = "fallback") -> DispatchTable:
    """Measures `candidates` at each size through this rank's daemon and
    returns the group's dispatch table (see the module docstring).

    Collective over `process_group`. `desc` defaults to
    describe_group(process_group); `sizes_bytes` are per-rank sizes of the
    tensor the caller holds (see DispatchTable.count_of).
    """
    import torch.distributed as dist

    collective_enum(collective)
    specs = [candidate_spec(candidate(c)) for c in candidates]
    if not specs:
        raise ValueError("candidates: at least one is required")
    world = dist.get_world_size(process_group)
    desc = desc or describe_group(process_group)
    elem = dtype_bytes(dtype)
    div = world if collective in ("reduce_scatter", "all_to_all") else 1
    counts = sorted({max(1, b // elem // div) for b in sizes_bytes})
    request = pb.SweepRequest(
        group=desc.proto(), counts=counts, options=with_presync(options),
        problem=problem(collective, dtype, 0, specs, op=op, label=f"dispatch:{collective}"))

    def ask() -> list[pb.ProblemResult]:
        with Client(desc.target, connect_timeout=min(timeout, 10.0)) as c:
            results, _ = c.sweep_table(request, timeout=timeout)
            return results

    # Bound before unpacking: mypy infers T from the targets of an unpacking.
    agreed = ask_agreed(
        desc, ask, lambda rs: [(r.problem.count, r.winner_index) for r in rs],
        process_group=process_group, on_unavailable=on_unavailable)
    results, reason = agreed
    if results is None:
        fallback = [pb.ProblemResult(problem=pb.Problem(count=n), status=pb.FALLBACK,
                                     winner=specs[0], winner_index=0) for n in counts]
        table = _table(collective, dtype, world, specs, fallback)
        table.fallback, table.reason = True, reason
        return table
    return _table(collective, dtype, world, specs, results)
