"""Describing a torch.distributed group to the daemon.

    desc = describe_group(pg)            # collective: every rank of pg, OUTSIDE compilation
    desc = describe_from_env()           # or from the launcher's environment (one host)
    decision = autotuned.rankrun.tune_rank(desc, [problem(...)])   # per rank, no collective

describe_group runs one all_gather_object over the group: each rank sends its
daemon target, whether that daemon answered, its host, its local GPU and its
daemon's peer name, so every rank learns the group's daemons once. Call it
where every rank surely calls it, outside torch.compile (autotuned.inductor
does at enable(), or at first use before a graph is compiled). The result
turns into the per-rank Group message (members, this rank, whole_group
false) that lets the daemon match the asks of one round.

describe_from_env needs no collective: it reads torchrun's environment
(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, and TORCHELASTIC_RUN_ID or
MASTER_ADDR/MASTER_PORT for the group id), for a group on one host only.

Asking is per rank (autotuned.rankrun.tune_rank): each rank asks only its
daemon, which alone keeps the ranks together; nothing here runs a
process-group collective while asking. A description that does not fit the
process group it is used with is GroupMismatch (GroupDescription.check, a
local check).

describe_group's collective may run where PyTorch's Python dispatcher is on
(inside a compile). It runs with it off: through it, a gloo collective is
enqueued while holding the GIL, and ProcessGroupGloo's worker thread, which
frees a finished work's tensors under the same queue lock, then waits for
the GIL: both ranks hang (seen in 2.11).
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import socket
from collections.abc import Sequence
from typing import Any, Optional

from autotuned import channels
from autotuned._proto import autotuned_pb2 as pb
from autotuned.client import candidate_spec, check_timeout, default_target, normalize_target
from autotuned.errors import AutotunedError, GroupMismatch, InvalidArgument

DEFAULT_PRESYNC_WINDOW_US = 2_000_000


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


def check_member(process_group: Any) -> None:
    """InvalidArgument naming `process_group` when this process is not one
    of its ranks (torch.distributed gives such a process rank -1 in it)."""
    import torch.distributed as dist

    if process_group is not None and dist.get_rank(process_group) < 0:
        raise InvalidArgument(
            f"process_group: this process (global rank {dist.get_rank()}) is not a member of "
            f"the group (global ranks {_global_ranks(process_group)}); only its members "
            "describe or tune it")


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
    InvalidArgument naming `process_group` on a process outside it, naming
    `connect_timeout` unless it is a finite number of seconds above 0.
    """
    import torch.distributed as dist

    check_timeout("connect_timeout", connect_timeout)
    check_member(process_group)
    rank = dist.get_rank(process_group)
    world = dist.get_world_size(process_group)
    tgt = normalize_target(target) if target else default_target()
    host = socket.gethostname()
    reachable, error, peer, gpus = True, "", "", []
    try:
        info = channels.channel(tgt).node_info(timeout=connect_timeout)
        peer, gpus = info.peer_address, list(info.gpus)
        channels.mark_up(tgt)
    except AutotunedError as err:
        reachable, error = False, str(err)
        channels.mark_down(tgt, error)
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
    return GroupDescription(id=_group_id(everyone[0]["id"]), rank=rank, world_size=world,
                            global_ranks=tuple(e["global_rank"] for e in everyone),
                            ranks=tuple(ranks))


def _group_id(text: str) -> str:
    """A group id within the daemon's 256 characters."""
    return text if len(text) <= 200 else "torch:" + hashlib.sha256(text.encode()).hexdigest()


def describe_from_env(target: Optional[str] = None) -> Optional[GroupDescription]:
    """The world as torchrun (or any launcher setting its variables) started
    it, without a collective: RANK and WORLD_SIZE; the group id from
    TORCHELASTIC_RUN_ID and TORCHELASTIC_RESTART_COUNT (an elastic restart
    is a new group, whose rounds start afresh), else MASTER_ADDR and
    MASTER_PORT. Every rank on
    one host (WORLD_SIZE == LOCAL_WORLD_SIZE) asks the same daemon, `target`
    (default: $AUTOTUNED_SOCKET, else the default socket), and rank r runs
    on local GPU r (its LOCAL_RANK on one host). None when a variable is
    missing or the ranks span hosts: use describe_group then."""
    env = os.environ
    try:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        local_world = int(env.get("LOCAL_WORLD_SIZE", "-1"))
    except (KeyError, ValueError):
        return None
    run_id = env.get("TORCHELASTIC_RUN_ID", "")
    if run_id and run_id != "none":
        gid = f"torchelastic:{run_id}:{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    elif env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        gid = f"env:{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
    else:
        return None
    if local_world != world or not 0 <= rank < world:
        return None
    tgt = normalize_target(target) if target else default_target()
    host = socket.gethostname()
    ranks = tuple(RankInfo(rank=r, global_rank=r, hostname=host, target=tgt, local_gpu=r,
                           daemon="", reachable=True, error="") for r in range(world))
    return GroupDescription(id=_group_id(f"{gid}:world{world}"), rank=rank, world_size=world,
                            global_ranks=tuple(range(world)), ranks=ranks)


@dataclasses.dataclass
class GroupDecision:
    """The outcome of an ask (autotuned.rankrun.tune_rank): the same on every rank."""

    results: list[pb.ProblemResult]   # one per problem; FALLBACK ones when fallback
    fallback: bool                    # True: the daemon's answer was not used
    reason: str                       # why, when fallback

    @property
    def winners(self) -> list[str]:
        return [r.winner for r in self.results]


def fallback_results(problems: Sequence[pb.Problem], reason: str) -> list[pb.ProblemResult]:
    """FALLBACK results: the first candidate of each problem, with `reason`."""
    out = []
    for p in problems:
        first = p.candidates[0] if p.candidates else pb.Candidate()
        out.append(pb.ProblemResult(problem=p, status=pb.FALLBACK, reason=reason,
                                    winner=candidate_spec(first), winner_index=0))
    return out


def _all_gather_object(out: list[Any], value: Any, process_group: Any) -> None:
    """dist.all_gather_object with PyTorch's Python dispatcher off (see the
    module docstring)."""
    import torch.distributed as dist
    from torch._dispatch.python import no_python_dispatcher

    with no_python_dispatcher():
        dist.all_gather_object(out, value, group=process_group)


def agree(process_group: Any, value: Any) -> list[Any]:
    """Every rank's `value` (all_gather_object over the group), in rank order.
    A collective, for checks outside the asks (examples, tests)."""
    import torch.distributed as dist

    everyone: list[Any] = [None] * dist.get_world_size(process_group)
    _all_gather_object(everyone, value, process_group)
    return everyone


def with_presync(options: Optional[pb.Options]) -> pb.Options:
    """`options` with presync_window_us defaulted to DEFAULT_PRESYNC_WINDOW_US;
    InvalidArgument naming `options` when it is not a pb.Options."""
    check_options(options)
    opts = pb.Options()
    if options is not None:
        opts.CopyFrom(options)
    if not opts.presync_window_us:
        opts.presync_window_us = DEFAULT_PRESYNC_WINDOW_US
    return opts


def check_options(options: Any) -> None:
    """InvalidArgument naming `options` unless it is None or a pb.Options."""
    if options is not None and not isinstance(options, pb.Options):
        raise InvalidArgument(f"options: must be an autotuned.pb.Options, got "
                              f"{type(options).__name__}")
