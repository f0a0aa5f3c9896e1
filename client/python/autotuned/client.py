"""A typed client of the autotuned daemon (service autotuned.v1.Autotune).

    from autotuned import Client, problem

    with Client() as daemon:                      # /run/autotuned/autotuned.sock
        answer = daemon.tune([problem("all_reduce", "bfloat16", count=1 << 20,
                                      candidates=["all_reduce/one_shot",
                                                  "all_reduce/two_shot"])])
        print(answer.results[0].winner)

Targets: a socket path ("/path/to.sock"), "unix:/path", or "host:port" for
a daemon started with --listen; by default $AUTOTUNED_SOCKET, else
/run/autotuned/autotuned.sock.

Every call has a deadline: measuring calls (tune, sweep) `measure_timeout`
seconds, the others `query_timeout`. Failures raise autotuned.errors
exceptions carrying the daemon's status code and message unchanged.

A Client may be used from several threads at once; close() it (or use it as a
context manager) when done. autotuned.channels keeps one Client per daemon
for the life of the process; the package's helpers ask through it.
"""
from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Callable, Optional, Union

import grpc

from autotuned._proto import autotuned_pb2 as pb
from autotuned._proto import autotuned_pb2_grpc as pb_grpc
from autotuned.errors import AutotunedError, InvalidArgument, Unavailable, from_rpc_error

DEFAULT_SOCKET = "/run/autotuned/autotuned.sock"
SOCKET_ENV = "AUTOTUNED_SOCKET"
DEFAULT_MEASURE_TIMEOUT_S = 600.0
DEFAULT_QUERY_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0

CandidateLike = Union[str, pb.Candidate]

_COLLECTIVES = {
    "all_reduce": pb.ALL_REDUCE,
    "all_gather": pb.ALL_GATHER,
    "reduce_scatter": pb.REDUCE_SCATTER,
    "all_to_all": pb.ALL_TO_ALL,
    "broadcast": pb.BROADCAST,
}
_DTYPES = {
    "float32": pb.FLOAT32, "fp32": pb.FLOAT32, "float": pb.FLOAT32,
    "bfloat16": pb.BFLOAT16, "bf16": pb.BFLOAT16,
    "float16": pb.FLOAT16, "fp16": pb.FLOAT16, "half": pb.FLOAT16,
}
_DTYPE_BYTES = {pb.FLOAT32: 4, pb.BFLOAT16: 2, pb.FLOAT16: 2}
_OPS = {"sum": pb.SUM, "max": pb.MAX, "min": pb.MIN}


def default_target() -> str:
    """$AUTOTUNED_SOCKET when set and not empty, else the default socket."""
    return normalize_target(os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET)


def normalize_target(target: str) -> str:
    """A gRPC target: bare paths get "unix:"; "scheme:..." and "host:port" stay."""
    if not target:
        raise InvalidArgument("target: empty")
    if target.startswith("/"):
        if len(target.encode()) > 107:
            raise InvalidArgument(f"target: unix socket path longer than 107 bytes: {target}")
        return "unix:" + target
    return target


def check_timeout(field: str, seconds: Any) -> float:
    """`seconds` as a deadline: a finite number above 0 (an int or float, not
    a bool), else InvalidArgument naming `field`. 0 would be no wait at all
    (or, read as "unset", the default), a negative or NaN one a call that
    fails at once, an infinite one a wait without a deadline."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or \
            not math.isfinite(seconds) or seconds <= 0:
        raise InvalidArgument(f"{field}: must be a finite number of seconds above 0, "
                              f"got {seconds!r}")
    return float(seconds)


def collective_enum(name: Union[str, int]) -> pb.Collective.ValueType:
    """autotuned.v1.Collective for "all_reduce", "all_gather", ... (or the enum)."""
    if isinstance(name, int):
        return pb.Collective.ValueType(name)
    try:
        return _COLLECTIVES[name.lower()]
    except KeyError:
        raise InvalidArgument(
            f"collective: unknown collective {name!r} (one of {', '.join(_COLLECTIVES)})") from None


def collective_name(value: int) -> str:
    for name, v in _COLLECTIVES.items():
        if v == value:
            return name
    return pb.Collective.Name(value)


def dtype_enum(dtype: object) -> pb.DType.ValueType:
    """autotuned.v1.DType for "float32"/"bf16"/... or a torch.dtype."""
    if isinstance(dtype, int):
        return pb.DType.ValueType(dtype)
    name = str(dtype).lower()
    if name.startswith("torch."):
        name = name[len("torch."):]
    try:
        return _DTYPES[name]
    except KeyError:
        raise InvalidArgument(f"dtype: {dtype!r} is not one the daemon measures "
                              "(float32, bfloat16, float16)") from None


def dtype_bytes(dtype: object) -> int:
    return _DTYPE_BYTES[dtype_enum(dtype)]


def candidate(spec: CandidateLike, params: Optional[Mapping[str, int]] = None) -> pb.Candidate:
    """A Candidate from "impl" or "impl:name=int,name=int" (as autotunectl takes)."""
    if isinstance(spec, pb.Candidate):
        return spec
    impl, _, rest = spec.strip().partition(":")
    if not impl:
        raise InvalidArgument(f"candidate {spec!r}: no implementation name")
    out = pb.Candidate(impl=impl)
    if rest:
        for piece in rest.split(","):
            name, eq, value = piece.partition("=")
            if not eq:
                raise InvalidArgument(f"candidate {spec!r}: parameter {piece!r} has no '='")
            try:
                out.params[name.strip()] = int(value)
            except ValueError:
                raise InvalidArgument(f"candidate {spec!r}: parameter {name.strip()}: "
                                      f"{value!r} is not an integer") from None
    for name, value in (params or {}).items():
        out.params[name] = int(value)
    return out


def candidate_spec(c: pb.Candidate) -> str:
    """The "impl:name=int,..." text of a Candidate (parameters sorted), or
    the name of a candidate the ranks run (`client` set): what answers call
    the winner."""
    if c.HasField("client"):
        return c.client.name
    if not c.params:
        return c.impl
    return c.impl + ":" + ",".join(f"{k}={c.params[k]}" for k in sorted(c.params))


def problem(collective: Union[str, int], dtype: object, count: int,
            candidates: Sequence[CandidateLike], *, op: Optional[str] = None, root: int = 0,
            split_counts: Sequence[int] = (), label: str = "") -> pb.Problem:
    """A Problem; `count` is in elements per rank (see proto/autotuned.proto).

    `op` is the reduce op of all_reduce and reduce_scatter (sum when None);
    the other collectives take none (given one, the daemon refuses it,
    naming `problems[i].op`). `candidates` are catalogue specs
    ("impl:name=int,...") or Candidates, such as autotuned.rankrun's
    client_candidate(name, key) for code the ranks run themselves.
    """
    kind = collective_enum(collective)
    op_value = pb.REDUCE_OP_UNSPECIFIED
    if op is not None or kind in (pb.ALL_REDUCE, pb.REDUCE_SCATTER):
        try:
            op_value = _OPS[(op or "sum").lower()]
        except KeyError:
            raise InvalidArgument(f"op: unknown reduce op {op!r} (sum, max, min)") from None
    return pb.Problem(collective=kind, dtype=dtype_enum(dtype),
                      count=int(count), split_counts=list(split_counts), op=op_value,
                      root=root, candidates=[candidate(c) for c in candidates], label=label)


def whole_node_group(world_size: int, group_id: str = "",
                     gpus: Optional[Sequence[int]] = None) -> pb.Group:
    """A group served by one daemon on behalf of every rank: on its GPUs
    0..world_size-1, or rank r on GPU gpus[r] (len(gpus) == world_size)."""
    if gpus is not None and len(gpus) != world_size:
        raise InvalidArgument(f"gpus: {len(gpus)} GPUs for world_size {world_size}")
    members = [pb.Member(rank=r, local_gpu=int(g)) for r, g in enumerate(gpus or [])]
    return pb.Group(id=group_id, world_size=world_size, rank=0, whole_group=True,
                    members=members)


class Client:
    """One channel to one daemon; one blocking method per RPC."""

    def __init__(self, target: Optional[str] = None, *,
                 connect_timeout: Optional[float] = DEFAULT_CONNECT_TIMEOUT_S,
                 measure_timeout: float = DEFAULT_MEASURE_TIMEOUT_S,
                 query_timeout: float = DEFAULT_QUERY_TIMEOUT_S,
                 channel_options: Sequence[tuple[str, Any]] = ()) -> None:
        """Opens a channel to `target` (default: default_target()).

        With `connect_timeout` (seconds) the constructor waits that long for
        the channel to connect and raises Unavailable naming the target when
        it did not; None connects lazily, at the first call. Every timeout,
        here and a call's `timeout` (None: measure_timeout or
        query_timeout), is a finite number of seconds above 0, else
        InvalidArgument naming it.
        `channel_options` are gRPC channel arguments (autotuned.channels
        bounds the reconnect backoff with them).
        """
        self.target = normalize_target(target) if target else default_target()
        self.measure_timeout = check_timeout("measure_timeout", measure_timeout)
        self.query_timeout = check_timeout("query_timeout", query_timeout)
        if connect_timeout is not None:
            check_timeout("connect_timeout", connect_timeout)
        self._channel = grpc.insecure_channel(self.target, options=list(channel_options))
        self._stub = pb_grpc.AutotuneStub(self._channel)
        if connect_timeout is not None and not self.ready(connect_timeout):
            self._channel.close()
            raise Unavailable(f"no daemon answered within {connect_timeout:g} s",
                              target=self.target)

    def close(self) -> None:
        self._channel.close()

    def ready(self, timeout: float) -> bool:
        """Whether the channel connects within `timeout` seconds."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
            return True
        except grpc.FutureTimeoutError:
            return False

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _deadline(self, timeout: Optional[float], default: float) -> float:
        """A call's `timeout`, or `default` when None (0 is no default)."""
        return default if timeout is None else check_timeout("timeout", timeout)

    def _call(self, method: Callable[..., Any], request: Any, timeout: float) -> Any:
        timeout = check_timeout("timeout", timeout)
        try:
            return method(request, timeout=timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e, self.target) from None

    def tune(self, problems: Union[pb.TuneRequest, Iterable[pb.Problem]], *,
             group: Optional[pb.Group] = None, options: Optional[pb.Options] = None,
             timeout: Optional[float] = None) -> pb.TuneResponse:
        """Tunes a batch of problems; one ProblemResult per problem, in order.

        `problems` is a TuneRequest, or problems with `group` (default: the
        whole node, world size 2) and `options`.
        """
        if isinstance(problems, pb.TuneRequest):
            request = problems
        else:
            request = pb.TuneRequest(group=group or whole_node_group(2),
                                     problems=list(problems), options=options)
        return self._call(self._stub.Tune, request,
                          self._deadline(timeout, self.measure_timeout))

    def run_step(self, request: pb.StepRequest, *, timeout: float) -> pb.StepReply:
        """A rank at a barrier of a run (docs/protocol.md, "Candidates the
        ranks run"); answers when every rank reached it or at its bound."""
        return self._call(self._stub.RunStep, request, timeout)

    def report(self, request: pb.RunReport, *, timeout: float) -> pb.TuneResponse:
        """A rank's times for a run; answers the round's decision."""
        return self._call(self._stub.Report, request, timeout)

    def sweep(self, request: pb.SweepRequest, *,
              timeout: Optional[float] = None) -> Iterator[pb.SweepUpdate]:
        """Streams a sweep: a SweepUpdate per size as measured, then the table.

        The deadline covers the whole stream. Errors raise when the stream
        reaches them, from the iteration.
        """
        deadline = self._deadline(timeout, self.measure_timeout)
        try:
            stream = self._stub.Sweep(request, timeout=deadline)
            for update in stream:  # noqa: UP028 - `yield from` would also close() the stream
                yield update
        except grpc.RpcError as e:
            raise from_rpc_error(e, self.target) from None

    def sweep_table(self, request: pb.SweepRequest, *, timeout: Optional[float] = None
                    ) -> tuple[list[pb.ProblemResult], pb.DispatchTable]:
        """Runs a sweep to its end: the per-size results and the dispatch table."""
        sizes: list[pb.ProblemResult] = []
        table: Optional[pb.DispatchTable] = None
        for update in self.sweep(request, timeout=timeout):
            if update.HasField("size_result"):
                sizes.append(update.size_result)
            elif update.HasField("table"):
                table = update.table
        if table is None:
            raise AutotunedError("the sweep stream ended without a dispatch table",
                                 target=self.target, code="INTERNAL")
        return sizes, table

    def list_implementations(self, collective: Union[str, int, None] = None,
                             *, timeout: Optional[float] = None) -> pb.ListImplementationsResponse:
        kind = pb.COLLECTIVE_UNSPECIFIED if collective is None else collective_enum(collective)
        request = pb.ListImplementationsRequest(collective=kind)
        return self._call(self._stub.ListImplementations, request,
                          self._deadline(timeout, self.query_timeout))

    def node_info(self, *, timeout: Optional[float] = None) -> pb.NodeInfoResponse:
        return self._call(self._stub.NodeInfo, pb.NodeInfoRequest(),
                          self._deadline(timeout, self.query_timeout))

    def list_cache(self, *, timeout: Optional[float] = None) -> pb.ListCacheResponse:
        return self._call(self._stub.ListCache, pb.ListCacheRequest(),
                          self._deadline(timeout, self.query_timeout))

    def clear_cache(self, *, timeout: Optional[float] = None) -> pb.ClearCacheResponse:
        return self._call(self._stub.ClearCache, pb.ClearCacheRequest(),
                          self._deadline(timeout, self.query_timeout))
