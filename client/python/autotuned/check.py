"""Whether a candidate's output is as correct as the reference's: the check
of a client candidate's verify run against the reference candidate's output
(autotuned.rankrun; docs/protocol.md, "Candidates the ranks run").

    from autotuned.check import same_output, terms_of
    n = terms_of("all_reduce", world_size=4)        # 4 terms per element
    why = same_output(out, ref, terms=n)            # "" when out passes
    why = same_output(out, ref, terms=n, scale=x.abs().max().item())

Two correct candidates of a sum need not agree bit for bit: each adds the
same n terms (one per rank) in its own order, rounding every partial sum to
the dtype, or accumulates in a wider type and rounds once. Each rounding
errs by at most u times the value it rounds (u, the unit roundoff: 2^-8
bfloat16, 2^-11 float16, 2^-24 float32, 2^-53 float64; half the dtype's
machine epsilon in general), so a computed sum of n terms is within
(n - 1) * u * P <= n * u * P of the exact sum, P the largest partial sum in
magnitude, and two computed sums differ by at most 2 * n * u * P. P is not
known from the outputs; it is bounded by

    M = max(|ref|_inf, |out|_inf, n * scale)

(infinity norms over the tensor's finite elements; `scale` is the largest
magnitude of one term, such as this rank's own input's infinity norm, and
counts only when the caller gives it). A tensor passes when every element
satisfies

    |out - ref| <= 2 * n * u * (M + tiny)

where tiny is the dtype's smallest normal number (a rounding into the
subnormal range errs by at most u * tiny). The number of terms: the world
size for a sum (all_reduce, reduce_scatter); 1 for a copy (all_gather,
all_to_all, broadcast) and for max and min, which are exact in any order.

Without `scale`, M bounds the partial sums as long as the ranks' terms do
not cancel to far below their own size everywhere in the tensor (random
data of mixed signs, or ranks of very different scales, are fine: the
largest element of the result is at least as large as the partial sums of
most elements). Callers whose inputs cancel (x on one rank, -x + y on
another) give `scale`.

Exact comparisons: tensors of integer or bool dtype; and floating data whose
reference is integer-valued with max(|ref|_inf, n * scale) below 1 / u
(256 in bfloat16, 2048 in float16, 2^24 in float32), whose sums are exact
integers in any order (the nccl-tests style patterns the daemon checks its
own candidates with, kernels/pattern.h). Non-finite elements: a NaN or an
infinity must be where the reference has the same one (a NaN where the
reference has a number fails, and so does the reverse).
"""
from __future__ import annotations

import math
from typing import Any, Optional, Union

from autotuned._proto import autotuned_pb2 as pb
from autotuned.client import collective_enum
from autotuned.errors import InvalidArgument
from autotuned.errors import bounded_reason as _bounded

_SUMS = (pb.ALL_REDUCE, pb.REDUCE_SCATTER, pb.COLLECTIVE_UNSPECIFIED)
_EXACT_OPS = (pb.MAX, pb.MIN)


def terms_of(collective: Union[str, int], world_size: int, op: Optional[int] = None) -> int:
    """How many terms each output element of `collective` sums: the world size
    for all_reduce and reduce_scatter (and an unspecified collective) with the
    sum op; 1 for copies (all_gather, all_to_all, broadcast) and for max and
    min. `op` is a ReduceOp enum value (unset: sum)."""
    if world_size < 1:
        raise InvalidArgument(f"world_size: must be at least 1, got {world_size}")
    kind = collective_enum(collective)
    if kind in _SUMS and op not in _EXACT_OPS:
        return int(world_size)
    return 1


def bound(dtype: Any, terms: int, magnitude: float) -> float:
    """The largest difference |out - ref| allowed between two sums of `terms`
    terms in `dtype` (a torch floating dtype) whose partial sums stay within
    `magnitude`: 2 * terms * u * (magnitude + tiny)."""
    import torch

    info = torch.finfo(dtype)
    return 2.0 * terms * (info.eps / 2.0) * (magnitude + info.tiny)


def same_output(out: Any, ref: Any, *, terms: int = 1, scale: Optional[float] = None) -> str:
    """Why `out` differs from `ref` ("" when it matches): nested tuples and
    lists element by element; tensors by shape and dtype, then exactly or
    within the bound of the module docstring for sums of `terms` terms (the
    same `terms` and `scale` for every tensor); Python ints and other values
    by ==, Python floats within a relative 1e-6 (their dtype is unknown)."""
    if terms < 1:
        raise InvalidArgument(f"terms: must be at least 1, got {terms}")
    if scale is not None and not scale >= 0:   # also refuses NaN
        raise InvalidArgument(f"scale: must be a number >= 0, got {scale!r}")
    return _same(out, ref, terms, scale)


def _same(out: Any, ref: Any, terms: int, scale: Optional[float]) -> str:
    if isinstance(ref, (list, tuple)):
        if not isinstance(out, (list, tuple)) or len(out) != len(ref):
            return f"expected a sequence of {len(ref)}, got {_kind(out)}"
        for i, (o, r) in enumerate(zip(out, ref)):
            why = _same(o, r, terms, scale)
            if why:
                return f"[{i}]: {why}"
        return ""
    if hasattr(ref, "shape") and hasattr(ref, "dtype"):
        return _same_tensor(out, ref, terms, scale)
    if isinstance(ref, float) and isinstance(out, (int, float)):
        return "" if math.isclose(out, ref, rel_tol=1e-6) else f"{out!r} != {ref!r}"
    return "" if out == ref else _bounded(f"{out!r} != {ref!r}")


def _kind(x: Any) -> str:
    if hasattr(x, "shape"):
        return f"a tensor of shape {list(x.shape)}"
    return type(x).__name__


def _at(t: Any, flat: int) -> Any:
    return t.reshape(-1)[flat].item()


def _same_tensor(out: Any, ref: Any, terms: int, scale: Optional[float]) -> str:
    import torch

    if not isinstance(out, torch.Tensor):
        return f"expected a tensor, got {_kind(out)}"
    if out.shape != ref.shape or out.dtype != ref.dtype:
        return (f"shape {list(out.shape)} {out.dtype}, the reference's "
                f"{list(ref.shape)} {ref.dtype}")
    r = ref.detach()
    o = out.detach().to(r.device)
    if r.is_complex():
        o, r = torch.view_as_real(o), torch.view_as_real(r)
    if not r.is_floating_point():
        return _exact(o, r)
    finite_r, finite_o = torch.isfinite(r), torch.isfinite(o)
    if not bool(finite_r.all()) or not bool(finite_o.all()):
        # Where either is not finite, both hold the same value (NaN: both NaN).
        odd = (~finite_r | ~finite_o) & ~((o == r) | (o.isnan() & r.isnan()))
        if bool(odd.any()):
            flat = int(odd.reshape(-1).nonzero()[0])
            return (f"{int(odd.sum())} of {r.numel()} elements not finite where the "
                    f"reference's differ, first at flat index {flat}: "
                    f"{_at(o, flat)!r}, the reference's {_at(r, flat)!r}")
        zero = torch.zeros((), dtype=r.dtype, device=r.device)
        o, r = torch.where(finite_o, o, zero), torch.where(finite_r, r, zero)
    if r.numel() == 0:
        return ""
    info = torch.finfo(r.dtype)
    u = info.eps / 2.0
    # float32 holds every bfloat16 and float16 exactly; their differences
    # need no more than its precision against a bound of at least 2^-11.
    work = torch.float64 if r.element_size() >= 4 else torch.float32
    rw, ow = r.to(work), o.to(work)
    ref_norm = float(rw.abs().max())
    given = terms * scale if scale is not None else 0.0
    if max(ref_norm, given) < 1.0 / u and _integer_valued(rw.reshape(-1)):
        return _exact(o, r, " of integer-valued data")
    magnitude = max(ref_norm, float(ow.abs().max()), given)
    tol = bound(r.dtype, terms, magnitude)
    diff = (ow - rw).abs().reshape(-1)
    worst = int(diff.argmax())
    largest = float(diff[worst])
    if largest <= tol:
        return ""
    over = int((diff > tol).sum())
    return (f"max abs difference {largest:.6g} at flat index {worst} ({_at(o, worst)!r}, "
            f"the reference's {_at(r, worst)!r}), {over} of {r.numel()} elements above "
            f"the bound {tol:.3g} = 2 * {terms} terms * u {u:.3g} * magnitude "
            f"{magnitude:.6g} ({str(r.dtype).replace('torch.', '')})")


def _integer_valued(flat: Any) -> bool:
    head = flat[:256]   # most data that is not tells at once
    return bool((head == head.round()).all()) and bool((flat == flat.round()).all())


def _exact(o: Any, r: Any, what: str = "") -> str:
    import torch

    if torch.equal(o, r):
        return ""
    bad = (o != r).reshape(-1).nonzero()
    flat = int(bad[0]) if len(bad) else 0
    return (f"{len(bad)} of {r.numel()} elements differ (exact comparison{what}), first at "
            f"flat index {flat}: {_at(o, flat)!r} != {_at(r, flat)!r}")
