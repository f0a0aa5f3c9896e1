"""A dispatch table for one tensor-parallel group, made once at worker startup,
from the worker's own implementations (and, if wanted, the daemon's).

    from autotuned.vllm import max_sizes_json, tune_dispatch

    def nccl(x):                  # each gets the tensor of the size being tuned
        dist.all_reduce(x, group=tp_group)      # in place: returning None means x
    def symm_one_shot(x):
        return my_symm_mem_one_shot(x)
    table = tune_dispatch(tp_group, dtype=torch.bfloat16,
                          candidates={"nccl": nccl, "symm_one_shot": symm_one_shot})
    table.pick(x)                 # "symm_one_shot" for this tensor's size
    run = table.runner()          # x -> the pick's output, with the callables above
    table.max_sizes()             # {"symm_one_shot": {2: 262144}, "nccl": {2: 67108864}}
    max_sizes_json([table])       # the same as JSON, as vLLM's *_MAX_SIZES dicts read

`candidates` is a dict name -> callable(x), or a list whose entries are:
  * (name, callable(x)), as in the dict: x is this rank's input at the size
    measured (integer-valued data, so outputs are compared exactly); the
    callable returns its output, or None when it writes into x;
  * (name, key, make(x)): make is called once per size with x and returns
    the zero-argument callable that is run and timed (buffers it needs are
    made there, outside the timing); `key` says what the code is
    (autotuned.rankrun.content_key): a changed key is measured again;
  * a catalogue implementation ("all_reduce/one_shot", "impl:name=int,...")
    that the daemon runs itself (autotuned.kernels runs its kernels here;
    the plain "<collective>/nccl" is timed by the ranks: NCCL below).
    One named without parameters is measured at each of its parameter
    shapes (autotuned.shapes: the launch shapes and chunk sizes that
    bench/gpu_run.sh sweeps, the default first; at most `max_candidates`
    candidates in all), so each size gets that implementation's best shape;
    the table names the shape ("all_reduce/one_shot:blocks=128,threads=1024"),
    and its runner runs it. One given with parameters is measured as given.
A callable's own key is a digest of its name, its source and the names of
the functions it closes over: editing it measures it again.

NCCL: the table's runner() runs "<collective>/nccl" in the caller's
process, through torch.distributed: a copy of the tensor, then the call,
which is not the daemon's call alone (with NCCL's graph mixing on, 1-2 us
less below 256 KiB, 13 % more at 64 MiB; docs/gpu.md). So "<collective>/nccl"
given without parameters (all_reduce, all_gather, reduce_scatter: the
collectives whose NCCL autotuned.dispatch runs) is timed by the ranks, as
a candidate they run: autotuned.dispatch.nccl_runner, the very Dispatcher
code runner() runs for it, under the same timing mode as the caller's
callables. It keeps its name, so pick(), runner() and max_sizes() say
"all_reduce/nccl" as before, and the table lists it in `timed_in_ranks`
(format() says so; in write_jsonl() its answers name it as a candidate the
ranks ran, `client`). This holds for a table of the daemon's
implementations only too: its runner() runs NCCL here just the same (the
P2P kernels are the daemon's code wherever they run, and stay timed by the
daemon). all_to_all's and broadcast's NCCL, which no runner() runs, stay
the daemon's. NCCL given with parameters is the daemon's own, timed in the
daemon: NCCL's algorithm, protocol or channels ("all_reduce/nccl:algo=2,
proto=3") are applied by the daemon's NCCL tuner plugin inside the daemon,
and runner() cannot run them (autotuned.dispatch.parse_spec refuses them),
so beside candidates the ranks time they are refused (InvalidArgument
naming the entry); "all_reduce/nccl:algo=0,channels=0,proto=0" (NCCL's own
choice, stated) stays the daemon's single-process figure, ranked as such:
for comparing the two (bench/regret_gpu.py), not a table to run.

Every size is a problem of ONE per-rank Tune (autotuned.rankrun.tune_rank):
the ranks run their callables as the daemon's schedule says, the daemon
times, ranks and caches, and every rank gets the same table. The table
does not take each size's winner blindly: it uses the fewest ranges such
that no range's candidate is measurably slower than another at any size
inside it (autotuned.merge.table_picks), so a winner that alternates with
a tied candidate from size to size is one range, and a real crossover
stays. Every rank of the group calls tune_dispatch once (describe_group,
by default, is a collective; the Tune is not). Where the daemon is absent
or fails, every rank gets the same fallback table: the first candidate as
given at every size, with `fallback` True and the reason.

The export: vLLM picks its all-reduce by message size, each implementation
taking messages up to a largest size per world size
(vllm/distributed/device_communicators/all_reduce_utils.py:
CUSTOM_ALL_REDUCE_MAX_SIZES and SYMM_MEM_ALL_REDUCE_MAX_SIZES, {device
capability: {world size: bytes}}). DispatchTable.max_sizes() gives the
measured decision in that form; max_sizes_dict / max_sizes_json merge the
tables of several world sizes.
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import math
import operator
import re
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, Union

from autotuned import channels
from autotuned._proto import autotuned_pb2 as pb
from autotuned.client import (
    CandidateLike,
    candidate,
    candidate_spec,
    check_timeout,
    collective_enum,
    dtype_bytes,
    dtype_enum,
    problem,
)
from autotuned.dispatch import NCCL_PARAMS, Dispatcher, nccl_runner, nearest_winner
from autotuned.errors import AutotunedError, InvalidArgument, Unavailable
from autotuned.group import GroupDescription, check_member, check_options, describe_group
from autotuned.kernels_lib import IMPLEMENTATIONS
from autotuned.merge import table_picks
from autotuned.rankrun import RankCandidate, RankProblem, client_candidate, content_key, tune_rank
from autotuned.shapes import DEFAULT_MAX_CANDIDATES, DEFAULT_MAX_SHAPES, expand

# 1 KiB .. 64 MiB per rank, powers of two.
DEFAULT_SIZES_BYTES = tuple(1 << s for s in range(10, 27))


@dataclasses.dataclass(frozen=True)
class SizeTiming:
    """One measured size: the table's pick and every candidate's median, in us."""

    count: int
    bytes: int
    winner: str                      # candidate spec the table uses here
    winner_index: int
    median_us: dict[str, float]      # candidate spec -> median (inf when ruled out)
    status: str                      # TUNED, CACHED, FALLBACK, FAILED
    # The daemon's winner at this size where the table uses another one
    # that is not measurably slower than it (autotuned.merge); "" where
    # they are the same.
    measured_winner: str = ""


@dataclasses.dataclass(frozen=True)
class SizeRange:
    """Consecutive measured sizes with the same pick (bounds inclusive)."""

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
    candidates: list[str]            # as measured: an implementation's shapes each
    sizes: list[SizeTiming]
    ranges: list[SizeRange]
    fallback: bool = False
    reason: str = ""
    # The candidates as the caller gave them, and for each of `candidates`
    # the index in `given` it comes from (an implementation given without
    # parameters is measured as its shapes); empty: `candidates` as given.
    given: list[str] = dataclasses.field(default_factory=list)
    origin: list[int] = dataclasses.field(default_factory=list)
    # The daemon's implementations among `candidates` that the ranks timed,
    # as runner() runs them, instead of the daemon (the plain
    # "<collective>/nccl": torch.distributed's collective in this process).
    timed_in_ranks: list[str] = dataclasses.field(default_factory=list)
    # The caller's callables by candidate name (the (name, callable(x))
    # entries; x itself when one returns None), which runner() runs; left
    # out of comparisons.
    callables: dict[str, Callable[[Any], Any]] = dataclasses.field(
        default_factory=dict, compare=False, repr=False)
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
        and above the largest measured size, the winner there; the first
        candidate where the nearest size has none (FAILED)."""
        if not self.sizes:
            return 0
        return max(0, nearest_winner([s.count for s in self.sizes],
                                     [s.winner_index for s in self.sizes],
                                     self.count_of(tensor_or_count)))

    def pick(self, tensor_or_count: Union[int, Any]) -> str:
        """The candidate spec (e.g. "all_reduce/one_shot") for this size."""
        return self.candidates[self.pick_index(tensor_or_count)]

    def runner(self, p2p: Any = None, *, op: str = "sum",
               others: Optional[dict] = None, process_group: Any = None) -> Any:
        """A callable x -> Tensor running this table's pick for x: the daemon's
        implementation itself, as a torch op of autotuned.kernels (P2P kernels
        through `p2p`, an autotuned.kernels.P2PGroup; "<collective>/nccl"
        through torch.distributed), or the caller's callables given to
        tune_dispatch. `others` maps candidate specs or names to more of the
        caller's own callables. See autotuned.dispatch.Dispatcher."""
        return Dispatcher(self, p2p, op=op, others={**self.callables, **(others or {})},
                          process_group=process_group)

    def max_sizes(self) -> dict[str, dict[int, int]]:
        """{candidate: {world_size: largest message in bytes it should take}},
        the form of vLLM's CUSTOM_ALL_REDUCE_MAX_SIZES[capability] and
        SYMM_MEM_ALL_REDUCE_MAX_SIZES[capability]: per-rank input bytes, as
        vLLM compares `inp.numel() * inp.element_size()` with them.

        Read as vLLM's chain: a message goes to the candidate with the
        smallest largest size that it does not exceed; the winner at the
        largest measured size takes anything larger too (NCCL's place in
        vLLM). Keys are the shapes that win ("all_reduce/one_shot:blocks=128,
        threads=1024"); a candidate as given none of whose shapes wins any
        size gets 0 under its given name. What the form cannot say (a
        candidate winning again above another's range, or the last one
        winning below another's largest size) goes to the chain's choice;
        max_sizes_exceptions() lists those ranges."""
        largest, _ = self._chain()
        names: list[str] = []
        for g, specs in self.shapes_of().items():
            won = [s for s in specs if s in largest]
            names += won or [g]
        order = sorted(names, key=lambda n: (n not in largest, largest.get(n, 0)))
        return {name: {self.world_size: largest.get(name, 0)} for name in order}

    def shapes_of(self) -> dict[str, list[str]]:
        """{candidate as given: the candidates measured for it}, in order."""
        if not self.given or len(self.origin) != len(self.candidates):
            return {c: [c] for c in self.candidates}
        out: dict[str, list[str]] = {g: [] for g in self.given}
        for spec, i in zip(self.candidates, self.origin):
            out[self.given[i]].append(spec)
        return out

    def max_sizes_exceptions(self) -> list[str]:
        """The measured ranges that max_sizes() sends elsewhere, as text."""
        return self._chain()[1]

    def _chain(self) -> tuple[dict[str, int], list[str]]:
        ranges = [r for r in self.ranges if r.winner]
        if not ranges:
            return {}, []
        last = ranges[-1].winner
        largest: dict[str, int] = {}
        exceptions: list[str] = []
        current = ""
        for r in ranges:
            if r.winner == last:
                continue
            if r.winner in largest and r.winner != current:
                exceptions.append(f"{_human(r.min_bytes)}..{_human(r.max_bytes)}: {r.winner} "
                                  "wins again above another candidate's range")
                continue
            largest[r.winner] = r.max_bytes
            current = r.winner
        below = max(largest.values(), default=0)
        exceptions += [f"{_human(r.min_bytes)}..{_human(r.max_bytes)}: {last} wins below "
                       f"another candidate's largest size" for r in ranges
                       if r.winner == last and r.min_bytes <= below]
        largest[last] = ranges[-1].max_bytes
        return largest, exceptions

    def write_jsonl(self, path: str) -> None:
        """Writes the table as `autotunectl --json sweep` prints a sweep (one
        SweepUpdate per line): the daemon's per-size results as received
        (each candidate named with its parameters), then the table's ranges
        (`table`: each range's candidate spec, with its shape, and index in
        `candidates`). `python -m autotuned.plot PATH -o FILE.png` draws it:
        time against size per candidate, each size's winner marked."""
        from google.protobuf import json_format

        total = len(self.results)
        updates = [pb.SweepUpdate(size_result=r, done=k + 1, total=total)
                   for k, r in enumerate(self.results)]
        ranges = [pb.SizeRange(min_count=r.min_count, max_count=r.max_count,
                               min_bytes=r.min_bytes, max_bytes=r.max_bytes, winner=r.winner,
                               winner_index=r.winner_index) for r in self.ranges]
        updates.append(pb.SweepUpdate(table=pb.DispatchTable(ranges=ranges), done=total,
                                      total=total))
        with open(path, "w") as f:
            for update in updates:
                f.write(json_format.MessageToJson(update, indent=None,
                                                  preserving_proto_field_name=True) + "\n")

    def format(self) -> str:
        """The table as text: one line per range, then one per size."""
        head = f"{self.collective} {self.dtype} world_size={self.world_size}"
        if self.fallback:
            head += f" FALLBACK ({self.reason})"
        lines = [head]
        if self.timed_in_ranks:
            lines.append(f"  timed in the ranks as runner() runs it: "
                         f"{', '.join(self.timed_in_ranks)}")
        for r in self.ranges:
            us = ", ".join(f"{t:.1f}" for t in r.winner_us)
            lines.append(f"  {_human(r.min_bytes)}..{_human(r.max_bytes)} -> {r.winner}"
                         + (f"  [{us}] us" if us else ""))
        for s in self.sizes:
            others = "  ".join(f"{k}={v:.1f}" for k, v in s.median_us.items())
            tied = f"  (measured winner {s.measured_winner}; not measurably faster)" \
                if s.measured_winner else ""
            lines.append(f"    {_human(s.bytes):>8} {s.status:<8} {s.winner:<28} {others}{tied}")
        return "\n".join(lines)


def _human(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n}B"


def _dtype_name(dtype: object) -> str:
    return pb.DType.Name(dtype_enum(dtype)).lower()


def max_sizes_dict(tables: Sequence[DispatchTable],
                   capability: Optional[str] = None) -> dict[str, Any]:
    """The max_sizes() of tables of several world sizes merged: {candidate:
    {world_size: bytes}}, or with `capability` (e.g. "9.0", as vLLM keys by
    torch.cuda.get_device_capability) {candidate: {capability: {world_size:
    bytes}}}: per candidate, the shape of vLLM's *_MAX_SIZES dicts."""
    merged: dict[str, dict[int, int]] = {}
    for t in tables:
        for name, by_world in t.max_sizes().items():
            merged.setdefault(name, {}).update(by_world)
    if capability is None:
        return dict(merged)
    return {name: {capability: by_world} for name, by_world in merged.items()}


def max_sizes_json(tables: Sequence[DispatchTable], capability: Optional[str] = None) -> str:
    """max_sizes_dict as JSON (world sizes become string keys)."""
    return json.dumps(max_sizes_dict(tables, capability), indent=2, sort_keys=True)


def _table(collective: str, dtype: object, world: int, specs: list[str],
           results: Sequence[pb.ProblemResult], given: Optional[list[str]] = None,
           origin: Optional[list[int]] = None) -> DispatchTable:
    size = dtype_bytes(dtype)
    picks = table_picks(results)
    sizes = []
    for r, pick in zip(results, picks):
        # By position: the daemon names candidates canonically (defaults
        # filled in, "all_reduce/ring:chunk_kib=256"), the caller maybe not.
        med = {specs[c.index]: (c.median_us if c.ok else math.inf) for c in r.ranked
               if 0 <= c.index < len(specs)}
        won = 0 <= pick < len(specs)   # FAILED: no winner
        measured = r.winner_index if r.winner and r.status != pb.FAILED else -1
        sizes.append(SizeTiming(count=r.problem.count, bytes=r.problem.count * size,
                                winner=specs[pick] if won else "",
                                winner_index=pick if won else -1,
                                median_us={s: med.get(s, math.inf) for s in specs},
                                status=pb.DecisionStatus.Name(r.status),
                                measured_winner=specs[measured]
                                if 0 <= measured < len(specs) and measured != pick else ""))
    ranges: list[SizeRange] = []
    for s in sizes:
        us = s.median_us.get(s.winner, math.inf)
        if ranges and ranges[-1].winner_index == s.winner_index:
            last = ranges[-1]
            ranges[-1] = dataclasses.replace(last, max_count=s.count, max_bytes=s.bytes,
                                             winner_us=last.winner_us + (us,))
        else:
            ranges.append(SizeRange(s.count, s.count, s.bytes, s.bytes, s.winner,
                                    s.winner_index, (us,)))
    return DispatchTable(collective, _dtype_name(dtype), world, specs, sizes, ranges,
                         results=list(results), given=list(given or []),
                         origin=list(origin or []))


Entry = Union[CandidateLike, tuple[str, Callable[[Any], Any]],
              tuple[str, str, Callable[[Any], Callable[[], Any]]]]


@dataclasses.dataclass(frozen=True)
class _Own:
    """One of the caller's candidates."""

    name: str
    key: str
    fn: Optional[Callable[[Any], Any]] = None              # fn(x) -> output or None
    make: Optional[Callable[[Any], Callable[[], Any]]] = None   # make(x) -> run()
    # Made ready before the Tune is sent (RankCandidate.prepare).
    prepare: Optional[Callable[[], None]] = None
    # A daemon implementation (its spec is `name`) that the ranks time as
    # runner() runs it, not a callable of the caller's.
    implementation: bool = False


def _code_key(name: str, fn: Callable[..., Any]) -> str:
    """A digest of what `fn` runs: its name, source (else qualified name) and
    the names of the functions it closes over."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"
    cells = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ())
             if _cell_set(c)]
    called = [getattr(v, "__qualname__", None) or str(v) for v in cells if callable(v)]
    return content_key(name, source, called)


def _cell_set(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
        return True
    except ValueError:
        return False


def _entries(candidates: Union[Mapping[str, Callable[[Any], Any]], Sequence[Entry]]
             ) -> list[Union[pb.Candidate, _Own]]:
    items: Sequence[Any] = list(candidates.items()) if isinstance(candidates, Mapping) \
        else candidates
    out: list[Union[pb.Candidate, _Own]] = []
    for i, e in enumerate(items):
        if isinstance(e, (str, pb.Candidate)):
            out.append(candidate(e))
        elif isinstance(e, tuple) and len(e) == 2 and callable(e[1]):
            out.append(_Own(str(e[0]), _code_key(str(e[0]), e[1]), fn=e[1]))
        elif isinstance(e, tuple) and len(e) == 3 and callable(e[2]):
            out.append(_Own(str(e[0]), str(e[1]), make=e[2]))
        else:
            raise InvalidArgument(f"candidates[{i}]: a catalogue name, (name, callable(x)) or "
                                  f"(name, key, make(x)), got {type(e).__name__}")
    if not out:
        raise InvalidArgument("candidates: at least one is required")
    return out


class _RanksNccl:
    """The plain "<collective>/nccl" of a table as the ranks time it: the
    Dispatcher of that candidate alone (autotuned.dispatch.nccl_runner), so
    that what is timed is what runner() runs for it. One for every size;
    made ready before the Tune (what it raises is the candidate's failure on
    this rank); close() releases its group."""

    def __init__(self, collective: str, op: Optional[str], process_group: Any) -> None:
        self.collective, self.process_group = collective, process_group
        self.op = (op or "sum").lower()
        self.run: Optional[Dispatcher] = None

    def prepare(self) -> None:
        if self.run is None:
            self.run = nccl_runner(self.collective, op=self.op,
                                   process_group=self.process_group)

    def make(self, x: Any) -> Callable[[], Any]:
        self.prepare()
        run = self.run
        assert run is not None
        return lambda: run(x)

    def close(self) -> None:
        if self.run is not None:
            self.run.close()


def _nccl_key(collective: str, op: Optional[str], backend: str) -> str:
    """What the ranks' "<collective>/nccl" runs: torch.distributed's backend
    and versions (NCCL's where it is the backend) and this package's."""
    import torch

    from autotuned import _version

    nccl = ""
    if backend == "nccl":
        try:
            nccl = str(torch.cuda.nccl.version())
        except Exception:  # noqa: BLE001 - a torch without NCCL: the backend says it
            nccl = "?"
    return content_key("ranks", f"{collective}/nccl", (op or "sum").lower(), backend,
                       torch.__version__, nccl, _version.__version__)


def _nccl_in_ranks(entries: list[Union[pb.Candidate, _Own]], collective: str,
                   ranks_nccl: Optional[_RanksNccl], key: str
                   ) -> list[Union[pb.Candidate, _Own]]:
    """`entries` with the plain "<collective>/nccl" (no parameters) a
    candidate the ranks run (`ranks_nccl`, under `key`), under the same name;
    unchanged where no Dispatcher runs that collective's NCCL
    (`ranks_nccl` None). InvalidArgument naming the entry for NCCL with
    NCCL's algorithm, protocol or channels set beside candidates the ranks
    time: the caller's process cannot run it as the daemon measured it."""
    nccl = f"{collective}/nccl"
    out: list[Union[pb.Candidate, _Own]] = []
    for e in entries:
        if ranks_nccl is not None and isinstance(e, pb.Candidate) and \
                not e.HasField("client") and e.impl == nccl and not e.params:
            out.append(_Own(nccl, key, make=ranks_nccl.make, prepare=ranks_nccl.prepare,
                            implementation=True))
        else:
            out.append(e)
    if any(isinstance(e, _Own) for e in out):
        for i, e in enumerate(out):
            if isinstance(e, pb.Candidate) and e.impl == nccl and \
                    any(e.params.get(k, 0) for k in NCCL_PARAMS):
                raise InvalidArgument(
                    f"candidates[{i}]: {candidate_spec(e)!r} sets NCCL's algorithm, protocol "
                    "or channels, which the daemon's NCCL tuner plugin applies in the daemon; "
                    "beside candidates the ranks time it would rank a figure of code that "
                    f"runner() does not run (give {nccl!r}: NCCL's own choice, timed in "
                    "the ranks)")
    return out


class _Call:
    """A caller's candidate at one size: its input made at the first run (so
    that each candidate's verify run sees fresh data), then reused."""

    def __init__(self, own: _Own, make_input: Callable[[], Any]) -> None:
        self.own, self.make_input = own, make_input
        self.x: Any = None
        self.call: Optional[Callable[[], Any]] = None

    def run(self) -> Any:
        if self.call is None:
            self.x = self.make_input()
            if self.own.make is not None:
                self.call = self.own.make(self.x)
            else:
                fn, x = self.own.fn, self.x
                assert fn is not None
                self.call = lambda: fn(x)
        return self.call()

    def output(self) -> Any:
        return self.x


def _input_maker(collective: str, count: int, world: int, dtype: Any, device: Any,
                 rank: int) -> Callable[[], Any]:
    """This rank's input for `count`: integer-valued (exact in any sum order)."""
    import torch

    n = count * world if collective in ("reduce_scatter", "all_to_all") else count

    def make() -> Any:
        return ((torch.arange(n, device=device) % 13) + rank + 1).to(dtype)
    return make


def tune_dispatch(process_group: Any = None, *,
                  candidates: Union[Mapping[str, Callable[[Any], Any]], Sequence[Entry]],
                  collective: str = "all_reduce", dtype: Any = "bfloat16",
                  sizes_bytes: Sequence[int] = DEFAULT_SIZES_BYTES,
                  desc: Optional[GroupDescription] = None, op: Optional[str] = None,
                  options: Optional[pb.Options] = None, timeout: float = 600.0,
                  on_unavailable: str = "fallback", device: Any = None,
                  shapes: bool = True, max_shapes: int = DEFAULT_MAX_SHAPES,
                  max_candidates: int = DEFAULT_MAX_CANDIDATES) -> DispatchTable:
    """Measures `candidates` at each size and returns the group's dispatch
    table (see the module docstring).

    Every rank of `process_group` calls it. `desc` defaults to
    describe_group(process_group) (a collective); `sizes_bytes` are per-rank
    sizes of the tensor the caller holds (see DispatchTable.count_of);
    `device` where the callables' inputs live (default: the current CUDA
    device on an NCCL group, else the CPU); `op` the reduce op of all_reduce
    and reduce_scatter (sum). With on_unavailable="raise" a fallback raises
    Unavailable instead. With `shapes` (the default) each catalogue
    implementation named without parameters is measured at each of its
    parameter shapes, at most `max_shapes` of one implementation and
    `max_candidates` candidates in all (autotuned.shapes.expand; the
    daemon's default limit per problem is 32); shapes=False measures it at
    its defaults only.

    Checked here, before anything is asked (so alike with the daemon down),
    InvalidArgument naming the argument: `sizes_bytes` (at least one; each
    an int of at least one element per rank, world_size elements for
    reduce_scatter and all_to_all), `timeout` (seconds, finite, above 0),
    `options`, `process_group` (this process must be a member; GroupMismatch
    when a given `desc` describes another group). Sizes the daemon refuses
    (over its memory cap) and candidates it refuses are named as the
    caller gave them (`sizes_bytes[i]`, `candidates[i]`).
    """
    import torch
    import torch.distributed as dist

    if on_unavailable not in ("fallback", "raise"):
        raise ValueError("on_unavailable must be 'fallback' or 'raise'")
    check_timeout("timeout", timeout)
    check_options(options)
    check_member(process_group)
    if desc is not None:
        desc.check(process_group)
    kind = collective_enum(collective)
    given_entries = _entries(candidates)
    given = [e.name if isinstance(e, _Own) else candidate_spec(e) for e in given_entries]
    world = dist.get_world_size(process_group)
    backend = str(dist.get_backend(process_group))
    elem = dtype_bytes(dtype)
    div = world if collective in ("reduce_scatter", "all_to_all") else 1
    sizes = _checked_sizes(sizes_bytes, elem, div, _dtype_name(dtype))
    # runner() runs "<collective>/nccl" here, through torch.distributed: the
    # ranks time it so (module docstring, "NCCL").
    ranks_nccl = _RanksNccl(collective, op, process_group) \
        if f"{collective}/nccl" in IMPLEMENTATIONS else None
    given_entries = _nccl_in_ranks(given_entries, collective, ranks_nccl,
                                   _nccl_key(collective, op, backend))
    desc = desc or describe_group(process_group)
    entries, origin = list(given_entries), list(range(len(given_entries)))
    listing = _listing(desc.target, kind, timeout) if shapes and any(
        isinstance(e, pb.Candidate) and not e.params for e in given_entries) else None
    if listing is not None:
        probe = problem(collective, dtype, 1, [], op=op)
        grown = expand([None if isinstance(e, _Own) else e for e in given_entries], listing,
                       collective=kind, dtype=probe.dtype, op=probe.op, world=world,
                       max_shapes=max_shapes, max_candidates=max_candidates)
        entries = [c if c is not None else given_entries[i]
                   for i, cs in enumerate(grown) for c in cs]
        origin = [i for i, cs in enumerate(grown) for _ in cs]
    names = [e.name if isinstance(e, _Own) else candidate_spec(e) for e in entries]
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" \
            else torch.device("cpu")
    torch_dtype = getattr(torch, pb.DType.Name(dtype_enum(dtype)).lower())
    counts = sorted({b // elem // div for b in sizes})
    protos = [client_candidate(e.name, e.key) if isinstance(e, _Own) else e for e in entries]
    problems = []
    for n in counts:
        p = problem(collective, dtype, n, protos, op=op, label=f"dispatch:{collective}:{n}")
        make_input = _input_maker(collective, n, world, torch_dtype, device, desc.rank)
        runners = {i: _rank_candidate(e, make_input) for i, e in enumerate(entries)
                   if isinstance(e, _Own)}
        problems.append(RankProblem(p, runners, device))
    if str(getattr(device, "type", device)).startswith("cuda") and \
            (options is None or not options.timing_mode):
        # vLLM runs its decode steps under CUDA graphs: GPU time decides
        # (docs/python.md, "vLLM"); the host's time per call comes back
        # beside it.
        graph = pb.Options()
        if options is not None:
            graph.CopyFrom(options)
        graph.timing_mode = pb.CUDA_GRAPH
        options = graph
    try:
        decision = tune_rank(desc, problems, options=options, timeout=timeout)
    except InvalidArgument as e:
        raise _as_given(e, sizes, [b // elem // div for b in sizes], counts, origin) from None
    finally:
        if ranks_nccl is not None:
            ranks_nccl.close()
    if decision.fallback and on_unavailable == "raise":
        raise Unavailable(decision.reason, target=desc.target)
    callables = {e.name: _returning(e.fn) for e in entries
                 if isinstance(e, _Own) and e.fn is not None}
    if decision.fallback:
        # As given, unexpanded: the same on every rank whatever each listed.
        fallback = [pb.ProblemResult(problem=problem(collective, dtype, n, [], op=op),
                                     status=pb.FALLBACK, reason=decision.reason,
                                     winner=given[0], winner_index=0) for n in counts]
        table = _table(collective, dtype, world, given, fallback)
        table.fallback, table.reason = True, decision.reason
    else:
        table = _table(collective, dtype, world, names, decision.results, given, origin)
        table.timed_in_ranks = [e.name for e in entries
                                if isinstance(e, _Own) and e.implementation]
    table.callables = callables
    return table


def _checked_sizes(sizes_bytes: Sequence[int], elem: int, div: int, dtype: str) -> list[int]:
    """`sizes_bytes` as ints, each of at least `div` elements of `elem`
    bytes; InvalidArgument naming the first that is not, or the argument
    when it is empty."""
    sizes = list(sizes_bytes)
    if not sizes:
        raise InvalidArgument("sizes_bytes: at least one size is required")
    out = []
    for i, b in enumerate(sizes):
        try:
            if isinstance(b, bool):
                raise TypeError
            n = operator.index(b)
        except TypeError:
            raise InvalidArgument(f"sizes_bytes[{i}]: must be an int (bytes per rank), got "
                                  f"{b!r}") from None
        if n // elem // div < 1:
            per = f"{div} elements" if div > 1 else "one element"
            raise InvalidArgument(f"sizes_bytes[{i}]: {n} bytes per rank is less than {per} "
                                  f"of {dtype} ({div * elem} bytes)")
        out.append(n)
    return out


_PROBLEM_FIELD = re.compile(r"^problems\[(\d+)\]\.(count|candidates\[(\d+)\])(\S*): ")


def _as_given(e: InvalidArgument, sizes: list[int], size_counts: list[int], counts: list[int],
              origin: list[int]) -> InvalidArgument:
    """The daemon's InvalidArgument about a problem's count or candidate,
    named as the caller gave it: the first of `sizes` that became that
    count, the entry of `candidates` that candidate comes from. Others as
    they are."""
    m = _PROBLEM_FIELD.match(e.details)
    if m is None:
        return e
    k = int(m.group(1))
    if m.group(3) is None:
        if not 0 <= k < len(counts) or counts[k] not in size_counts:
            return e
        i = size_counts.index(counts[k])
        field = f"sizes_bytes[{i}]"
        what = f"{sizes[i]} bytes per rank, "
    else:
        j = int(m.group(3))
        if not 0 <= j < len(origin):
            return e
        field = f"candidates[{origin[j]}]{m.group(4)}"
        what = ""
    daemon_field = e.details[:m.end() - 2]
    return InvalidArgument(f"{field}: {what}as the daemon's {daemon_field}: "
                           f"{e.details[m.end():]}", target=e.target)


def _listing(target: str, collective: int,
             timeout: float) -> Optional[pb.ListImplementationsResponse]:
    """The daemon's implementations of `collective`; None where it does not
    answer (the Tune then says why, or falls back)."""
    if channels.down_reason(target) is not None:
        return None
    try:
        return channels.channel(target).list_implementations(collective,
                                                             timeout=min(timeout, 30.0))
    except AutotunedError:
        return None


def _returning(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """fn as a runner calls it: its output, or x when it wrote into x."""
    def run(x: Any) -> Any:
        out = fn(x)
        return x if out is None else out
    return run


def _rank_candidate(own: _Own, make_input: Callable[[], Any]) -> RankCandidate:
    call = _Call(own, make_input)
    return RankCandidate(run=call.run, output=call.output, prepare=own.prepare)
