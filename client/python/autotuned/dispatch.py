"""Running a dispatch table's winner for each tensor, shared by
autotuned.vllm (which makes the tables) and autotuned.kernels (which runs
the implementations).

    run = Dispatcher(table, p2p)     # table: autotuned.vllm.DispatchTable
    y = run(x)                       # the table's winner for x's size

nearest_winner is the table's size -> winner rule; parse_spec reads a
candidate spec ("impl:blocks=16,threads=256") into the ops' arguments;
nccl_runner(collective) is a Dispatcher of "<collective>/nccl" alone.
Importing this module imports neither torch nor autotuned.vllm.
"""
from __future__ import annotations

import dataclasses
import itertools
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional

from autotuned.kernels_lib import IMPLEMENTATIONS, KernelsError, implementation
from autotuned.ops import register_group, register_ops, unregister_group

if TYPE_CHECKING:
    from autotuned.p2p import P2PGroup

# Names of the groups NCCL-only Dispatchers register: never reused, so a
# graph compiled against one never finds another's.
_NCCL_ONLY_IDS = itertools.count()


def nearest_winner(counts: Sequence[int], winners: Sequence[int], n: int) -> int:
    """The winner at the measured count nearest to n on a log scale (ties to
    the smaller), or at the end of the range beyond it. Plain comparisons of
    ints, so torch.compile traces it (a Dispatcher calls it inside graphs)."""
    n = max(1, n)
    if n <= counts[0]:
        return winners[0]
    for i in range(1, len(counts)):
        if n <= counts[i]:
            # log(n / lo) <= log(hi / n)  <=>  n * n <= lo * hi
            return winners[i - 1] if n * n <= counts[i - 1] * counts[i] else winners[i]
    return winners[-1]


@dataclasses.dataclass(frozen=True)
class Choice:
    """A candidate spec ("impl:blocks=16,threads=256") as op arguments."""

    spec: str
    impl: str
    blocks: int = 0
    threads: int = 0
    chunk_kib: int = 0

# NCCL's own algorithm, protocol and channels (0: NCCL's choice): the
# daemon's to force, through its NCCL tuner plugin; torch.distributed's NCCL
# in this process runs NCCL's choice, or the tuner plugin's
# (NCCL_TUNER_PLUGIN, docs/nccl_tuner.md).
NCCL_PARAMS = ("algo", "proto", "channels")


def parse_spec(spec: str) -> Choice:
    """A Choice from a candidate spec as the daemon and autotuned.vllm write it."""
    impl, _, rest = spec.strip().partition(":")
    params: dict[str, int] = {}
    for piece in filter(None, rest.split(",")):
        k, eq, v = piece.partition("=")
        if not eq:
            raise KernelsError(f"candidate {spec!r}: parameter {piece!r} is not name=int")
        params[k.strip()] = int(v)
    nccl = {k: params.pop(k) for k in NCCL_PARAMS if k in params}
    if any(nccl.values()):
        raise KernelsError(f"candidate {spec!r}: NCCL's algorithm, protocol and channels are "
                           "applied by the NCCL tuner plugin (docs/nccl_tuner.md), not here")
    unknown = set(params) - {"blocks", "threads", "chunk_kib"}
    if unknown:
        raise KernelsError(f"candidate {spec!r}: unknown parameters {sorted(unknown)}")
    return Choice(spec, impl, params.get("blocks", 0), params.get("threads", 0),
                  params.get("chunk_kib", 0))


class Dispatcher:
    """Runs the table's winner for each tensor: table.pick(x) -> the op.

        run = Dispatcher(table, p2p)     # table: autotuned.vllm.DispatchTable
        y = run(x)

    Every candidate of the table must be one autotuned.kernels runs, or be
    given in `others` (spec or implementation name -> callable(x) -> Tensor),
    checked when the Dispatcher is made. Tensors larger than the group's staging
    buffer (for the push one-shot and the copy engine, push_max_bytes and
    ce_max_bytes) go to torch.distributed's collective ("<collective>/nccl").
    `p2p` may be None when every candidate is NCCL or in `others`; the
    Dispatcher then registers a group of its own for the ops (on
    `process_group`), released with it.
    """

    def __init__(self, table: Any, p2p: Optional[P2PGroup] = None, *, op: str = "sum",
                 others: Optional[Mapping[str, Callable[[Any], Any]]] = None,
                 process_group: Any = None) -> None:
        register_ops()
        self.table = table
        self.collective = table.collective
        self.p2p = p2p
        self.op = op
        self.others = dict(others or {})
        self._release: Optional[weakref.finalize] = None
        if p2p is None:
            # NCCL-only dispatch still needs the group the ops find. Only this
            # Dispatcher's runs name it: it goes when the Dispatcher does (or
            # on close()).
            self._group_name = f"nccl-only:{next(_NCCL_ONLY_IDS)}"
            group = _NcclOnly(process_group)
            register_group(self._group_name, group, default=False)
            self._release = weakref.finalize(self, unregister_group, self._group_name, group)
        else:
            self._group_name = p2p.name
        try:
            self._prepare(table, p2p)
        except BaseException:
            self.close()
            raise

    def _prepare(self, table: Any, p2p: Optional[P2PGroup]) -> None:
        # A DispatchTable's sizes as plain ints: the pick traces in torch.compile.
        sizes = list(getattr(table, "sizes", None) or [])
        # Candidates that win no size (e.g. the P2P kernels on one rank, ruled
        # out) need not be runnable here: calling one says why it cannot run.
        winners = {max(0, s.winner_index) for s in sizes} if sizes else None
        self._runs: list[Callable[[Any], Any]] = [
            self._make(s) if winners is None or i in winners else self._make_or_refuse(s)
            for i, s in enumerate(table.candidates)]
        self._fallback = self._make(f"{self.collective}/nccl")
        # The largest tensor each candidate runs on (bytes; None: any): the
        # staging buffer's, or the implementation's own (max_bytes_attr).
        self._limits: list[Optional[int]] = [None] * len(table.candidates)
        if p2p is not None:
            for i, s in enumerate(table.candidates):
                impl = None if s in self.others else IMPLEMENTATIONS.get(s.split(":", 1)[0])
                self._limits[i] = int(getattr(p2p, impl.max_bytes_attr if impl else "max_bytes"))
        self._counts = tuple(s.count for s in sizes)
        # A size without a winner (FAILED, -1) runs the first candidate, as
        # the table's pick_index says (not candidates[-1]).
        self._winners = tuple(max(0, s.winner_index) for s in sizes)

    def close(self) -> None:
        """Releases the group an NCCL-only Dispatcher registered (garbage
        collection does it too); calling it afterwards raises KernelsError."""
        if self._release is not None:
            self._release()

    def pick_index(self, x: Any) -> int:
        """The table's pick for x (index in table.candidates)."""
        if not self._counts:
            return self.table.pick_index(x)
        return nearest_winner(self._counts, self._winners, self.table.count_of(x))

    def _make_or_refuse(self, spec: str) -> Callable[[Any], Any]:
        try:
            return self._make(spec)
        except KernelsError as e:
            why = str(e)

            def refuse(x: Any) -> Any:
                raise KernelsError(f"{why} (it wins no size of the table)")
            return refuse

    def _make(self, spec: str) -> Callable[[Any], Any]:
        import torch

        if spec in self.others:
            return self.others[spec]
        c = parse_spec(spec)
        if c.impl in self.others:
            return self.others[c.impl]
        impl = implementation(c.impl, self.collective)
        if impl.algo != 0 and self.p2p is None:
            raise KernelsError(f"candidate {spec!r} runs on the P2P kernels: pass a P2PGroup")
        # The runs hold no reference to the Dispatcher, so that dropping it
        # releases its group at once.
        g, op = self._group_name, self.op
        if self.collective == "all_reduce":
            return lambda x: torch.ops.autotuned.all_reduce(x, c.impl, g, c.blocks, c.threads,
                                                            c.chunk_kib, op)
        if self.collective == "all_gather":
            return lambda x: torch.ops.autotuned.all_gather(x, c.impl, g, c.blocks, c.threads)
        return lambda x: torch.ops.autotuned.reduce_scatter(x, c.impl, g, c.blocks, c.threads,
                                                            op)

    def _too_large(self, x: Any, i: int) -> bool:
        limit = self._limits[i]
        return limit is not None and x.numel() * x.element_size() > limit

    def pick(self, x: Any) -> str:
        """The candidate spec that runs for x."""
        i = self.pick_index(x)
        return f"{self.collective}/nccl" if self._too_large(x, i) else self.table.candidates[i]

    def __call__(self, x: Any) -> Any:
        i = self.pick_index(x)
        return self._fallback(x) if self._too_large(x, i) else self._runs[i](x)


def nccl_runner(collective: str, *, op: str = "sum", process_group: Any = None) -> Dispatcher:
    """x -> what a table's runner() runs where its pick is "<collective>/nccl":
    a Dispatcher whose one candidate is that (torch.distributed's collective
    on `process_group`, through torch.ops.autotuned, in this process).
    autotuned.vllm times a table's plain NCCL entry with it, in the ranks.
    KernelsError for a collective whose NCCL no Dispatcher runs (only
    all_reduce, all_gather and reduce_scatter). close() releases its group."""
    return Dispatcher(_Single(collective, f"{collective}/nccl"), None, op=op,
                      process_group=process_group)


@dataclasses.dataclass(frozen=True)
class _Single:
    """The table of one candidate, picked at every size."""

    collective: str
    spec: str

    @property
    def candidates(self) -> list[str]:
        return [self.spec]

    def pick_index(self, x: Any) -> int:
        return 0


class _NcclOnly:
    """The group the ops find when every candidate is torch.distributed's."""

    def __init__(self, process_group: Any) -> None:
        import torch.distributed as dist
        self.process_group = process_group
        self.world = dist.get_world_size(process_group)

