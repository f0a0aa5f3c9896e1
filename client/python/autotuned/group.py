"""Describing a torch.distributed group to the daemon, and asking as a group.

    desc = describe_group(pg)                 # collective: every rank of pg calls it
    decision = tune_group(desc, [problem(...)], process_group=pg)

describe_group runs one all_gather_object over the group: each rank sends its
daemon target, whether that daemon answered, its host, its local GPU and its
daemon's peer name, so every rank learns the group's daemons once. The result
turns into the per-rank Group message (members, this rank, whole_group
false) that lets the daemon match the asks of one round.

tune_group asks per rank and then agrees through the process group, so that
every rank ends with the same decision:
  * a description that does not match the process group raises GroupMismatch
    on every rank before anything is sent;
  * INVALID_ARGUMENT from any rank's daemon raises InvalidArgument (the
    daemon's message, naming the field) on every rank;
  * a daemon that is absent, unreachable, dies mid-call or answers
    differently gives every rank the same fallback: the first candidate of
    each problem, with the reason (or raises Unavailable on every rank with
    on_unavailable="raise").
No rank ever measures alone.

The collectives here may run inside torch.compile (Inductor asks at lowering
or scheduling time), where PyTorch's Python dispatcher is on. They run with it
off: through it, a gloo collective is enqueued while holding the GIL, and
ProcessGroupGloo's worker thread, which frees a finished work's tensors under
the same queue lock, then waits for the GIL: both ranks hang (seen in 2.11).
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import socket
from collections.abc import Sequence
from typing import Any, Callable, Optional, TypeVar

from autotuned._proto import autotuned_pb2 as pb
from autotuned.client import Client, candidate_spec, default_target, normalize_target
from autotuned.errors import AutotunedError, GroupMismatch, InvalidArgument, Unavailable

DEFAULT_PRESYNC_WINDOW_US = 2_000_000
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class RankInfo:
    """What one rank told the others in describe_group."""

    rank: int          # in the group
    global_rank: int   # in the default group
    hostname: str
    target: str        # its daemon's gRPC target
    local_gpu: int
    daemon: str        # its daemon's peer name ("" when the group is on one host)
    reachable: bool
    error: str         # why its daemon did not answer ("" when it did)


@dataclasses.dataclass(frozen=True)
class GroupDescription:
    """A torch.distributed group as the daemon sees it; the same on every rank
    except for `rank`."""

    id: str
    rank: int
    world_size: int
    global_ranks: tuple[int, ...]
    ranks: tuple[RankInfo, ...]

    @property
    def target(self) -> str:
        """This rank's daemon."""
        return self.ranks[self.rank].target

    @property
    def reachable(self) -> bool:
        """Whether every rank's daemon answered when the group was described."""
        return all(r.reachable for r in self.ranks)

    def unreachable_reason(self) -> str:
        bad = [f"rank {r.rank} ({r.hostname}, {r.target}): {r.error}"
               for r in self.ranks if not r.reachable]
        return "; ".join(bad)

    def proto(self) -> pb.Group:
        """The per-rank Group message for this rank's asks."""
        return pb.Group(
            id=self.id, world_size=self.world_size, rank=self.rank, whole_group=False,
            members=[pb.Member(rank=r.rank, daemon=r.daemon, local_gpu=r.local_gpu)
                     for r in self.ranks])

    def mismatch(self, process_group: Any = None) -> Optional[str]:
        """Why this description does not fit `process_group`, or None."""
        import torch.distributed as dist

        size = dist.get_world_size(process_group)
        rank = dist.get_rank(process_group)
        if size != self.world_size:
            return (f"group {self.id!r} was described with world_size {self.world_size}, "
                    f"but the process group has {size} ranks")
        if rank != self.rank:
            return (f"group {self.id!r} was described for rank {self.rank}, "
                    f"but this process is rank {rank} of the process group")
        ranks = tuple(_global_ranks(process_group))
        if ranks != self.global_ranks:
            return (f"group {self.id!r} was described for global ranks {list(self.global_ranks)}, "
                    f"but the process group holds {list(ranks)}")
        return None

    def check(self, process_group: Any = None) -> None:
        """Raises GroupMismatch when the description does not fit the group."""
        why = self.mismatch(process_group)
        if why:
            raise GroupMismatch(why, target=self.target)


def _global_ranks(process_group: Any) -> list[int]:
    import torch.distributed as dist

    if process_group is None or process_group == dist.group.WORLD:
        return list(range(dist.get_world_size()))
    return list(dist.get_process_group_ranks(process_group))


def parse_pci_bus_id(text: str) -> Optional[tuple[int, int, int]]:
    """(domain, bus, device) of a PCI bus id as CUDA or nvidia-smi write it
    ("0000:1b:00.0", "00000000:1B:00.0"); None when it is not one."""
    parts = text.strip().split(":")
    if len(parts) != 3:
        return None
    try:
        return int(parts[0], 16), int(parts[1], 16), int(parts[2].split(".")[0], 16)
    except ValueError:
        return None


def daemon_gpu_index(pci: tuple[int, int, int], gpus: Sequence[pb.Gpu]) -> Optional[int]:
    """The index, on the daemon's node, of the GPU at PCI address `pci`
    (domain, bus, device), among NodeInfo's `gpus`; None when none is there."""
    for g in gpus:
        if parse_pci_bus_id(g.pci_bus_id) == pci:
            return g.index
    return None


def _current_device_pci() -> Optional[tuple[int, int, int]]:
    try:
        import torch
    except ImportError:
        return None
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    try:  # torch's stubs do not declare the PCI fields; older torch lacks them
        return (int(props.pci_domain_id), int(props.pci_bus_id),  # type: ignore[attr-defined]
                int(props.pci_device_id))  # type: ignore[attr-defined]
    except AttributeError:
        return None


def _default_local_gpu(rank: int, gpus: Sequence[pb.Gpu]) -> int:
    """This process's GPU as the daemon numbers it: the current CUDA device
    found by its PCI address among the daemon's GPUs (so CUDA_VISIBLE_DEVICES
    and device order do not matter), else the current device's index, else
    $LOCAL_RANK, else the rank."""
    pci = _current_device_pci()
    if pci is not None:
        index = daemon_gpu_index(pci, gpus)
        if index is not None:
            return index
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.cuda.current_device()
    except ImportError:
        pass
    return int(os.environ.get("LOCAL_RANK", rank))


def describe_group(process_group: Any = None, *, target: Optional[str] = None,
                   local_gpu: Optional[int] = None, daemon: Optional[str] = None,
                   group_id: Optional[str] = None,
                   connect_timeout: float = 5.0) -> GroupDescription:
    """Describes `process_group` (default: the world) to the daemon.

    Collective: every rank of the group must call it. `target` is this rank's
    daemon (default: $AUTOTUNED_SOCKET or the default socket); `local_gpu`
    its GPU on that daemon's node, where the daemon measures this rank
    (default: the current CUDA device, found among the daemon's GPUs by its
    PCI address; else $LOCAL_RANK, else its rank); `daemon` its daemon's peer name
    (peer_advertise, needed only when the group spans hosts; default "" on
    one host, else "<hostname>:<peer port>" from NodeInfo). `group_id` must
    be the same on every rank; by default rank 0's is taken.
    """
    import torch.distributed as dist

    rank = dist.get_rank(process_group)
    world = dist.get_world_size(process_group)
    tgt = normalize_target(target) if target else default_target()
    host = socket.gethostname()
    reachable, error, peer, gpus = True, "", "", []
    try:
        with Client(tgt, connect_timeout=connect_timeout, query_timeout=connect_timeout) as c:
            info = c.node_info()
            peer, gpus = info.peer_address, list(info.gpus)
    except AutotunedError as err:
        reachable, error = False, str(err)
    gpu = _default_local_gpu(rank, gpus) if local_gpu is None else int(local_gpu)
    members = "-".join(map(str, _global_ranks(process_group)))
    mine = {"global_rank": dist.get_rank(), "hostname": host, "target": tgt,
            "local_gpu": gpu, "daemon": daemon, "peer": peer,
            "reachable": reachable, "error": error,
            "id": group_id or f"torch:{host}:{os.getpid()}:{members}"}
    everyone: list[Any] = [None] * world
    _all_gather_object(everyone, mine, process_group)
    one_host = len({e["hostname"] for e in everyone}) == 1
    ranks = []
    for r, e in enumerate(everyone):
        name = e["daemon"]
        if name is None:
            port = e["peer"].rsplit(":", 1)[-1] if e["peer"] else ""
            name = "" if one_host or not port else f"{e['hostname']}:{port}"
        ranks.append(RankInfo(rank=r, global_rank=e["global_rank"], hostname=e["hostname"],
                              target=e["target"], local_gpu=e["local_gpu"], daemon=name,
                              reachable=e["reachable"], error=e["error"]))
    gid = everyone[0]["id"]
    if len(gid) > 200:
        gid = "torch:" + hashlib.sha256(gid.encode()).hexdigest()
    return GroupDescription(id=gid, rank=rank, world_size=world,
                            global_ranks=tuple(e["global_rank"] for e in everyone),
                            ranks=tuple(ranks))


@dataclasses.dataclass
class GroupDecision:
    """The outcome of tune_group: the same on every rank."""

    results: list[pb.ProblemResult]   # one per problem; FALLBACK ones when fallback
    fallback: bool                    # True: the daemon's answer was not used
    reason: str                       # why, when fallback

    @property
    def winners(self) -> list[str]:
        return [r.winner for r in self.results]


def _fallback_results(problems: Sequence[pb.Problem], reason: str) -> list[pb.ProblemResult]:
    out = []
    for p in problems:
        first = p.candidates[0] if p.candidates else pb.Candidate()
        out.append(pb.ProblemResult(problem=p, status=pb.FALLBACK, reason=reason,
                                    winner=first.impl, winner_index=0))
    return out


def _summary(results: Sequence[pb.ProblemResult]) -> list[tuple[str, int, str]]:
    return [(r.winner, r.winner_index,
             ",".join(candidate_spec(c.candidate) for c in r.ranked)) for r in results]


def _all_gather_object(out: list[Any], value: Any, process_group: Any) -> None:
    """dist.all_gather_object with PyTorch's Python dispatcher off (see the
    module docstring)."""
    import torch.distributed as dist
    from torch._dispatch.python import no_python_dispatcher

    with no_python_dispatcher():
        dist.all_gather_object(out, value, group=process_group)


def agree(process_group: Any, value: Any) -> list[Any]:
    """Every rank's `value` (all_gather_object over the group), in rank order."""
    import torch.distributed as dist

    everyone: list[Any] = [None] * dist.get_world_size(process_group)
    _all_gather_object(everyone, value, process_group)
    return everyone


def ask_agreed(desc: GroupDescription, ask: Callable[[], T], summarize: Callable[[T], Any], *,
               process_group: Any = None,
               on_unavailable: str = "fallback") -> tuple[Optional[T], str]:
    """Runs `ask` (one per-rank call to this rank's daemon) on every rank and
    agrees on its outcome through `process_group`.

    Collective. Returns (value, "") when every rank's call succeeded with the
    same summarize(value); (None, reason) for the identical fallback. Raises
    GroupMismatch / InvalidArgument on every rank as the module docstring says.
    """
    if on_unavailable not in ("fallback", "raise"):
        raise ValueError("on_unavailable must be 'fallback' or 'raise'")
    # The check doubles as the barrier that lines the ranks up for the ask.
    checks = agree(process_group, desc.mismatch(process_group))
    bad = [(r, why) for r, why in enumerate(checks) if why]
    if bad:
        raise GroupMismatch("; ".join(f"rank {r}: {why}" for r, why in bad), target=desc.target)
    value: Optional[T] = None
    outcome: dict[str, Any]
    if not desc.reachable:
        outcome = {"error": "UNAVAILABLE", "details": desc.unreachable_reason(), "target": ""}
    else:
        try:
            value = ask()
            outcome = {"summary": summarize(value)}
        except AutotunedError as e:
            outcome = {"error": e.code, "details": e.details, "target": e.target}
    everyone = agree(process_group, outcome)
    invalid = [(r, o["details"]) for r, o in enumerate(everyone)
               if o.get("error") in ("INVALID_ARGUMENT", "UNIMPLEMENTED")]
    if invalid:
        details = {d for _, d in invalid}
        raise InvalidArgument(invalid[0][1] if len(details) == 1 else
                              "; ".join(f"rank {r}: {d}" for r, d in invalid),
                              target=desc.target)
    errors = [(r, o) for r, o in enumerate(everyone) if "error" in o]
    if errors:
        reason = "daemon unreachable or failed on some rank: " + "; ".join(
            f"rank {r}: {o['error']}: {o['details']}" + (f" ({o['target']})" if o["target"] else "")
            for r, o in errors)
        if on_unavailable == "raise":
            raise Unavailable(reason, target=desc.target)
        return None, reason
    if any(o["summary"] != everyone[0]["summary"] for o in everyone):
        return None, "ranks received different answers from their daemons"
    return value, ""


def with_presync(options: Optional[pb.Options]) -> pb.Options:
    """`options` with presync_window_us defaulted to DEFAULT_PRESYNC_WINDOW_US."""
    opts = pb.Options()
    if options is not None:
        opts.CopyFrom(options)
    if not opts.presync_window_us:
        opts.presync_window_us = DEFAULT_PRESYNC_WINDOW_US
    return opts


def tune_group(desc: GroupDescription, problems: Sequence[pb.Problem], *,
               process_group: Any = None, options: Optional[pb.Options] = None,
               timeout: float = 600.0, on_unavailable: str = "fallback") -> GroupDecision:
    """One per-rank Tune for `problems`, agreed on by every rank of the group.

    Collective over `process_group` (the group `desc` describes; it is
    checked). `options.presync_window_us` defaults to 2 s: the ranks are
    lined up by an all_gather just before they ask. See the module docstring
    for what each failure gives.
    """
    problems = list(problems)
    request = pb.TuneRequest(group=desc.proto(), problems=problems, options=with_presync(options))

    def ask() -> list[pb.ProblemResult]:
        with Client(desc.target, connect_timeout=min(timeout, 10.0)) as c:
            return list(c.tune(request, timeout=timeout).results)

    # Bound before unpacking: mypy infers T from the targets of an unpacking.
    agreed = ask_agreed(desc, ask, _summary, process_group=process_group,
                        on_unavailable=on_unavailable)
    results, reason = agreed
    if results is None:
        return GroupDecision(_fallback_results(problems, reason), True, reason)
    return GroupDecision(results, False, "")
