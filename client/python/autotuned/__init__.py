"""Python client of the autotuned daemon.

    autotuned.Client          typed gRPC client (Unix socket by default, TCP optional)
    autotuned.problem(...)    builds a Problem; autotuned.pb holds every message
    autotuned.errors          exceptions (InvalidArgument.field, Unavailable, ...)
    autotuned.channels        one channel per daemon for the process; daemons found down
    autotuned.group           describes a torch.distributed group to the daemon
    autotuned.rankrun         candidates the ranks run in their own processes: tune_rank
    autotuned.check           a candidate's output against the reference's: a sum's error bound
    autotuned.vllm            dispatch table for a tensor-parallel group, from its own callables
    autotuned.shapes          the parameter shapes of a catalogue implementation a table measures
    autotuned.merge           which candidate a size table uses at each size, from the answers
    autotuned.inductor        Inductor's collective selections, each choice timed as itself
    autotuned.kernels         the daemon's P2P kernels in this process: torch ops over CUDA IPC
    autotuned.dispatch        Dispatcher: a dispatch table's winner run per tensor
    autotuned.plot            a sweep's chart (matplotlib): python -m autotuned.plot SWEEP -o F.png

The torch-dependent modules (group, rankrun, check, vllm, inductor) import torch
only when used, autotuned.plot matplotlib; autotuned.kernels registers its ops when imported.
"""
from autotuned._proto import autotuned_pb2 as pb
from autotuned._version import __version__
from autotuned.client import (
    DEFAULT_SOCKET,
    Client,
    candidate,
    candidate_spec,
    default_target,
    problem,
    whole_node_group,
)
from autotuned.errors import (
    AutotunedError,
    DeadlineExceeded,
    FailedPrecondition,
    GroupMismatch,
    InvalidArgument,
    Unavailable,
)

__all__ = [
    "DEFAULT_SOCKET", "AutotunedError", "Client", "DeadlineExceeded", "FailedPrecondition",
    "GroupMismatch",
    "InvalidArgument", "Unavailable", "candidate", "candidate_spec", "default_target",
    "__version__", "pb", "problem", "whole_node_group",
]
