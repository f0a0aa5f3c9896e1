"""Inductor's collective autotuning, every choice timed as itself by the
ranks through the daemon's client round.

    import autotuned.inductor
    autotuned.inductor.enable()          # after init_process_group, before compiling

One explicit call switches it on (disable() switches it off); docs/python.md
("Inductor") is the user's guide. It applies to collective custom-op
selections: custom ops autotuned with torch._inductor.kernel.custom_op's
register_custom_op_autotuning / CustomOpConfig whose decompositions run a
collective (functional collectives, as make_fx traces them). Every choice of
such a selection (each decomposition and the op's own default) is a client
candidate (_choices), run by the ranks on the inputs Inductor makes for it
(_runners) when the daemon's round asks them to; the winner Inductor keeps
is the code that was timed (_select). With functional=True (the default),
the functional collectives of a compiled graph (torch.ops._c10d_functional
all_reduce, all_gather_into_tensor, reduce_scatter_tensor,
all_to_all_single, broadcast and the in-place all_reduce_ and broadcast_)
are such selections too, among implementations that compute the same thing,
Inductor's own lowering first (_functional); functional_off() leaves the
graphs compiled inside it alone. Other selections are Inductor's own.

Nothing here runs a collective during compilation: the group is learned
once, at enable() (describe_group when a process group is initialized,
else describe_from_env), and during compilation a rank only asks its own
daemon; the round's candidates run their own collectives on the caller's
process group when every rank is there. A late rank, a daemon that is absent
or dies, any error of the daemon's (INVALID_ARGUMENT included) or of the
integration's own code: the same FALLBACK (the op's default) on every rank,
with a warning naming the reason, never an exception out of the lowering nor
a wait beyond the daemon's window (_select.ask says why it is the same on
every rank). Inductor's caches: _caches. Its custom-op lowering: _lowering.
A selection over a dynamic dimension (dispatch_on and split_points, or,
without them, a symbolic dimension of the collective's input with the
ranges of a short ladder of message sizes): a winner per size range, all
ranges in one Tune, dispatched at run time by the size (_ranges).

Patches PyTorch 2.11.x only (select_algorithm.AlgorithmSelectorCache.__call__,
custom_op.autotune_custom_op, _standard_lowering_fn and
_range_based_lowering_fn, the lowerings of
the functional collectives, the FX graph and AOTAutograd caches' save and
key); enable() raises RuntimeError on any other version.
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Callable, Optional, Union

from autotuned._proto import autotuned_pb2 as pb
from autotuned.client import candidate, check_timeout, default_target, normalize_target
from autotuned.dispatch import parse_spec
from autotuned.errors import InvalidArgument
from autotuned.group import GroupDescription, check_options
from autotuned.inductor import _caches, _functional, _lowering, _ranges, _select
from autotuned.kernels_lib import KernelsError

SUPPORTED_TORCH = "2.11."
# A step of the round only runs its choice (verify, warmup, timed
# iterations): the choices' subgraph modules are compiled before the Tune is
# sent (_runners' prepare), outside the round's bounds. Ten seconds hold a
# step of a collective launched from Python on a loaded machine, and keep the
# run's bound (a few seconds plus steps x this) minutes, not an hour.
DEFAULT_CANDIDATE_TIMEOUT_MS = 10_000
# The pre-sync window of a compile's asks: ranks compile on their own, and
# the first selections of a fresh compile reach the daemon seconds apart (on
# 4 x H200, 2 of 4 ranks within 2 s, the others 2-4 s later). 10 s is the
# daemon's default limits.max_presync_window_us; only a late or dead rank
# makes anyone wait that long.
DEFAULT_PRESYNC_WINDOW_US = 10_000_000


@dataclasses.dataclass
class _State:
    group: GroupDescription
    impls: dict[Any, list[str]]
    deferred: bool
    options: Optional[pb.Options]
    timeout: float
    decisions: list[_select.Decision]
    dispatches: list[_ranges.Dispatch] = dataclasses.field(default_factory=list)


_state: Optional[_State] = None
_originals: dict[str, Any] = {}


def check_version(version: Optional[str] = None) -> None:
    """Raises RuntimeError unless `version` (default: torch's) is one the
    integration patches."""
    if version is None:
        import torch

        version = torch.__version__
    if not version.startswith(SUPPORTED_TORCH):
        raise RuntimeError(
            f"autotuned.inductor patches PyTorch {SUPPORTED_TORCH}x internals "
            f"(select_algorithm, kernel/custom_op, codecache); this is PyTorch {version}. "
            "Use PyTorch 2.11, or leave the integration off (Inductor's own autotuning).")


def _learn_group(process_group: Any, target: Optional[str]) -> GroupDescription:
    import torch.distributed as dist

    from autotuned.group import describe_from_env, describe_group

    if dist.is_available() and dist.is_initialized():
        return describe_group(process_group, target=target)
    desc = describe_from_env(target)
    if desc is None:
        raise RuntimeError("autotuned.inductor.enable(): no torch.distributed process group "
                           "is initialized and the launcher's environment does not describe "
                           "one host's ranks (RANK, WORLD_SIZE, LOCAL_WORLD_SIZE): call it "
                           "after init_process_group, or pass group=")
    return desc


def _patch(state: _State) -> None:
    import torch._inductor.kernel.custom_op as custom_op
    import torch._inductor.select_algorithm as sa

    if not _originals:
        _originals.update(call=sa.AlgorithmSelectorCache.__call__,
                          autotune_custom_op=custom_op.autotune_custom_op,
                          range_lowering=custom_op._range_based_lowering_fn,
                          standard_lowering=custom_op._standard_lowering_fn)
    call, lower = _originals["call"], _originals["autotune_custom_op"]

    def patched_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return _select.select(state, call, self, *args, **kwargs)

    def patched_lowering(*args: Any, **kwargs: Any) -> Any:
        return _lowering.autotune_custom_op(lower, state.impls, *args, **kwargs)

    sa.AlgorithmSelectorCache.__call__ = patched_call  # type: ignore[method-assign]
    custom_op.autotune_custom_op = patched_lowering
    custom_op._range_based_lowering_fn = _ranges.patched(state, _originals["range_lowering"])
    custom_op._standard_lowering_fn = _ranges.patched_standard(
        state, _originals["standard_lowering"])


def enable(*, impls: Optional[Mapping[Union[str, Callable[..., Any]],
                                      Union[str, Sequence[str]]]] = None,
           deferred: bool = False, process_group: Any = None,
           group: Optional[GroupDescription] = None, target: Optional[str] = None,
           options: Optional[pb.Options] = None, timeout: float = 600.0,
           functional: bool = True) -> None:
    """Times every choice of collective custom-op selections as itself (the
    module docstring). Call it on every rank, outside compilation: with a
    process group initialized it describes the group (a collective over
    `process_group`, default the world), else reads the launcher's
    environment; `group` skips both. `target`: this rank's daemon (default
    $AUTOTUNED_SOCKET). `impls` maps a custom op (its CustomOpDef, OpOverload
    or "ns::name") or one of its decompositions (the function or its
    __name__) to daemon implementations ("all_reduce/one_shot", or a list)
    added as extra choices run through torch.ops.autotuned, timed by the
    ranks as every choice ("all_reduce/nccl" too: torch.distributed's
    collective in this process); InvalidArgument for parameters those ops
    do not take (NCCL's algo, proto and channels: the daemon's tuner
    plugin applies them, in the daemon). `deferred`: one
    Tune per graph at scheduling time (functional collectives are asked
    for while lowering, one Tune each). `options`, `timeout`: the Tune's
    (options.timeout_ms defaults to DEFAULT_CANDIDATE_TIMEOUT_MS,
    options.presync_window_us to DEFAULT_PRESYNC_WINDOW_US).
    `functional`: the functional collectives of compiled graphs are
    selections too (default True; False leaves them to Inductor).
    Calling it again replaces the settings. InvalidArgument naming `timeout`
    unless it is a finite number of seconds above 0, naming `options`
    unless it is a pb.Options; the settings are then left as they were."""
    global _state
    check_version()
    check_timeout("timeout", timeout)
    check_options(options)
    table: dict[Any, list[str]] = {}
    for key, specs in (impls or {}).items():
        table[key] = [specs] if isinstance(specs, str) else list(specs)
        for spec in table[key]:
            candidate(spec)
            try:
                parse_spec(spec)
            except KernelsError as e:
                # NCCL's parameters are the daemon's tuner plugin's: a choice
                # named after them would run NCCL's own choice here.
                raise InvalidArgument(f"impls[{key!r}]: {e}") from None
    opts = pb.Options()
    if options is not None:
        opts.CopyFrom(options)
    if not opts.timeout_ms:
        opts.timeout_ms = DEFAULT_CANDIDATE_TIMEOUT_MS
    if not opts.presync_window_us:
        opts.presync_window_us = DEFAULT_PRESYNC_WINDOW_US
    if not opts.timing_mode:
        # GPU time, whether or not the graph runs under CUDA graphs: a
        # compiled graph's wrapper launches a collective for a few us of
        # host time, not the 100-300 us of the benchmark harness around a
        # choice, so an eager loop would time the harness (docs/python.md,
        # "Inductor", "How choices are timed"). Each choice's eager host cost comes back
        # beside it (CandidateResult.host_us); EVENT_LOOP asks for eager time.
        opts.timing_mode = pb.CUDA_GRAPH
    options = opts
    desc = group if group is not None else _learn_group(process_group, target)
    _state = _State(group=desc, impls=table, deferred=deferred, options=options,
                    timeout=timeout, decisions=[])
    _patch(_state)
    if functional:
        _functional.install(_state)
    else:
        _functional.uninstall()
    # What shapes the candidate lists and the daemon's cache key, for
    # Inductor's cache key (the window or iteration counts do not).
    settings = repr((deferred, sorted(sorted(v) for v in table.values()), options.timing_mode))
    _caches.install(normalize_target(target) if target else desc.target or default_target(),
                    settings)


def disable() -> None:
    """Restores Inductor's own selection, lowering and caches."""
    import torch._inductor.kernel.custom_op as custom_op
    import torch._inductor.select_algorithm as sa

    global _state
    if _originals:
        sa.AlgorithmSelectorCache.__call__ = _originals["call"]  # type: ignore[method-assign]
        custom_op.autotune_custom_op = _originals["autotune_custom_op"]
        custom_op._range_based_lowering_fn = _originals["range_lowering"]
        custom_op._standard_lowering_fn = _originals["standard_lowering"]
        _originals.clear()
    _functional.uninstall()
    _caches.uninstall()
    _state = None


@contextlib.contextmanager
def functional_off() -> Iterator[None]:
    """The graphs compiled inside (torch.compile compiles at a compiled
    function's first call, and again when a guard fails) keep Inductor's own
    lowering of every functional collective; part of Inductor's cache key,
    so a graph compiled inside is not served to a compile outside, nor the
    other way round."""
    with _functional.suspended():
        yield


def decisions() -> list[_select.Decision]:
    """Every selection decided by this process so far, in order (the same on
    every rank that compiled it): (selection name, {candidate name: median
    ms}, winner name, status, reason)."""
    return list(_state.decisions) if _state else []


def dispatches() -> list[_ranges.Dispatch]:
    """The dispatch table of every selection over a dynamic dimension this
    process lowered with ranges, in order (the same on every rank that
    lowered it): (op name, [(first size, last size or None for no bound,
    winner name), ...]), the merged ranges the compiled graph chooses among
    at run time (one: no dispatch; the op's default everywhere where the
    selection fell back); decisions() holds each range's own winner."""
    return list(_state.dispatches) if _state else []
