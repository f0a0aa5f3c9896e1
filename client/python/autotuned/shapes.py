"""The parameter shapes of a catalogue implementation that a size table
measures: a bounded grid over the parameters that tile the work, from what
the daemon lists (ListImplementations' ParamSpec: default, min, max).

    listing = client.list_implementations("all_reduce")
    specs = expand(["all_reduce/nccl", "all_reduce/one_shot"], listing, ...)
    # ["all_reduce/nccl", "all_reduce/one_shot:blocks=32,threads=512",
    #  "all_reduce/one_shot:blocks=16,threads=512", ...]

The grid is the one bench/gpu_run.sh sweeps the cuda backend's kernels
with, one axis at a time, the other parameters at their defaults:
  * blocks and threads together: (16, 512), (32, 512), (64, 1024),
    (128, 1024), each clipped to the parameters' ranges;
  * chunk_kib: the default / 4 and x 4, within its range (none when the
    default is 0, "no chunks", as the ring's whole shards);
  * any other parameter (e.g. the sim backend's `root`) keeps its default:
    it says what the implementation does, not how the work is tiled.
The default shape comes first (of equal estimates, the earlier wins). Pure:
no daemon, no torch.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

from autotuned._proto import autotuned_pb2 as pb

# (blocks, threads): the launch shapes bench/gpu_run.sh sweeps.
LAUNCH_SHAPES = ((16, 512), (32, 512), (64, 1024), (128, 1024))
CHUNK_FACTORS = (4,)   # chunk_kib / f and x f
DEFAULT_MAX_SHAPES = 6  # per implementation
DEFAULT_MAX_CANDIDATES = 32  # the daemon's default limits.max_candidates


def spec_of(impl: str, params: Mapping[str, int]) -> str:
    """"impl:name=value,..." with every parameter, sorted by name, as
    candidate_spec writes a Candidate."""
    if not params:
        return impl
    return impl + ":" + ",".join(f"{k}={params[k]}" for k in sorted(params))


def _clip(p: pb.ParamSpec, v: int) -> int:
    return max(p.min_value, min(p.max_value, v)) if p.max_value >= p.min_value else v


def shapes(impl: pb.Implementation, max_shapes: int = DEFAULT_MAX_SHAPES) -> list[dict[str, int]]:
    """`impl`'s parameter shapes, the default first, at most `max_shapes`
    (launch shapes before chunk sizes), every parameter present."""
    default = {p.name: int(p.default_value) for p in impl.params}
    by_name = {p.name: p for p in impl.params}
    out = [default]

    def add(changes: Mapping[str, int]) -> None:
        shape = {**default, **{k: _clip(by_name[k], v) for k, v in changes.items()}}
        if shape not in out:
            out.append(shape)

    if "blocks" in by_name and "threads" in by_name:
        for blocks, threads in LAUNCH_SHAPES:
            add({"blocks": blocks, "threads": threads})
    elif "blocks" in by_name:
        for blocks, _ in LAUNCH_SHAPES:
            add({"blocks": blocks})
    if "chunk_kib" in by_name and default["chunk_kib"] > 0:
        d = default["chunk_kib"]
        for f in CHUNK_FACTORS:
            add({"chunk_kib": max(1, d // f)})
            add({"chunk_kib": d * f})
    return out[:max(1, max_shapes)]


def _runs(impl: pb.Implementation, collective: int, dtype: int, op: int, world: int) -> bool:
    """Whether the listing says `impl` can run the problem (as autotunectl's
    candidate selection reads it; alignment varies by size and is left to
    the daemon)."""
    if impl.collective != collective:
        return False
    if impl.dtypes and dtype not in impl.dtypes:
        return False
    if collective in (pb.ALL_REDUCE, pb.REDUCE_SCATTER) and impl.ops and op not in impl.ops:
        return False
    return impl.min_world_size <= world and \
        (impl.max_world_size <= 0 or world <= impl.max_world_size)


def expand(given: Sequence[Optional[pb.Candidate]], listing: pb.ListImplementationsResponse,
           *, collective: int, dtype: int, op: int, world: int,
           max_shapes: int = DEFAULT_MAX_SHAPES,
           max_candidates: int = DEFAULT_MAX_CANDIDATES) -> list[list[Optional[pb.Candidate]]]:
    """Per entry of `given` (None: a candidate of the caller's, kept as it
    is), what it becomes: a catalogue implementation named without
    parameters that the listing says runs the problem becomes its shapes;
    any other entry stays as given. A shape equal (defaults filled in) to
    another entry is left out, since the daemon refuses a candidate listed
    twice. At most `max_candidates` in all: while there are more, the last
    shape of the implementation with the most shapes goes (ties: the later
    entry), so each keeps its default and its nearest variants."""
    impls = {i.name: i for i in listing.implementations}
    fixed: list[str] = []  # the entries with explicit parameters, canonical
    for c in given:
        if c is not None and c.params and c.impl in impls:
            defaults = {p.name: int(p.default_value) for p in impls[c.impl].params}
            fixed.append(spec_of(c.impl, {**defaults, **c.params}))
    out: list[list[Optional[pb.Candidate]]] = []
    for c in given:
        info = impls.get(c.impl) if c is not None else None
        if c is None or c.params or c.HasField("client") or info is None or \
                not _runs(info, collective, dtype, op, world):
            out.append([c])
            continue
        made = [pb.Candidate(impl=c.impl, params=s) for s in shapes(info, max_shapes)
                if spec_of(c.impl, s) not in fixed]
        out.append(list(made or [c]))
    while sum(len(x) for x in out) > max_candidates:
        most = max(range(len(out)), key=lambda i: (len(out[i]), i))
        if len(out[most]) <= 1:
            break
        out[most].pop()
    return out
