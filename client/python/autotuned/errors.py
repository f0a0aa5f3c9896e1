"""Exceptions raised by the autotuned Python client.

Every failed call raises a subclass of AutotunedError. The daemon's status
travels unchanged: `code` is the gRPC status code name and `details` its
message, which for INVALID_ARGUMENT starts with the offending field, e.g.
`problems[0].candidates[0].impl: unknown implementation "all_reduce/nope"`;
InvalidArgument.field holds that field path.
"""
from __future__ import annotations

import re
from typing import Optional

import grpc

# The daemon's bound on a reason a client reports (StepRequest.reason,
# StepTimes.reason), in bytes of UTF-8.
MAX_REASON = 1024


def bounded_reason(text: str) -> str:
    """`text` within MAX_REASON bytes of UTF-8, as the daemon counts."""
    raw = text.encode()
    if len(raw) <= MAX_REASON:
        return text
    return raw[:MAX_REASON - 3].decode(errors="ignore") + "..."

_SEGMENT = r'[A-Za-z_][A-Za-z0-9_]*(?:\[(?:\d+|"[^"]*")\])*'
_FIELD = re.compile(rf"^({_SEGMENT}(?:\.{_SEGMENT})*): ")


class AutotunedError(Exception):
    """A call to the daemon failed; `code` is the gRPC status code name."""

    code: str = "UNKNOWN"

    def __init__(self, details: str, *, target: str = "", code: Optional[str] = None):
        if code is not None:
            self.code = code
        self.details = details
        self.target = target
        where = f" ({target})" if target else ""
        super().__init__(f"{self.code}: {details}{where}")


class InvalidArgument(AutotunedError):
    """The daemon refused the request; `field` names the bad field, when given."""

    code = "INVALID_ARGUMENT"

    @property
    def field(self) -> Optional[str]:
        m = _FIELD.match(self.details)
        return m.group(1) if m else None


class Unavailable(AutotunedError):
    """No daemon answered at the target, it went away mid-call, or it is draining."""

    code = "UNAVAILABLE"


class DeadlineExceeded(AutotunedError):
    """The call's deadline passed before the daemon answered."""

    code = "DEADLINE_EXCEEDED"


class ResourceExhausted(AutotunedError):
    """The daemon is serving its maximum number of rounds, or the request is too large."""

    code = "RESOURCE_EXHAUSTED"


class Unimplemented(AutotunedError):
    """The daemon does not support what was asked (e.g. members on other daemons)."""

    code = "UNIMPLEMENTED"


class FailedPrecondition(AutotunedError):
    """The daemon no longer knows what was asked about: a round or a run it
    forgot (a restart, retention), or a second report of a rank."""

    code = "FAILED_PRECONDITION"


class Cancelled(AutotunedError):
    code = "CANCELLED"


class PermissionDenied(AutotunedError):
    """The socket exists but this user may not use it (see unix_socket_group)."""

    code = "PERMISSION_DENIED"


class Internal(AutotunedError):
    code = "INTERNAL"


class GroupMismatch(InvalidArgument):
    """A group description does not match the process group it is used with.

    Raised on the client side, before anything is sent to the daemon. A kind
    of InvalidArgument: `except InvalidArgument` catches it too.
    """


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.INTERNAL: Internal,
}


def from_rpc_error(error: grpc.RpcError, target: str = "") -> AutotunedError:
    """The AutotunedError for a failed gRPC call (code and message kept)."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = (error.details() if hasattr(error, "details") else None) or str(error)
    cls = _BY_CODE.get(code, AutotunedError)
    if cls is AutotunedError:
        return AutotunedError(details, target=target, code=code.name if code else "UNKNOWN")
    return cls(details, target=target)
