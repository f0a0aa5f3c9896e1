"""What the integration changes in the custom-op lowering (PyTorch 2.11,
torch/_inductor/kernel/custom_op.py, autotune_custom_op):

  * the op's tensor inputs are realized first: an unrealized input (a fused
    pointwise expression, `my_all_reduce(x * 2 + 1)`) makes
    SubgraphChoiceCaller's freeze_layout raise NotImplementedError
    ("Pointwise") in 2.11, with or without the integration;
  * the op's own default is a choice of every selection: 2.11 adds it only
    while no extern kernel of that name is registered, so only the first
    selection of an op in a process had it (ranks that compiled different
    graphs before would ask for different candidate lists);
  * `impls` adds the daemon's kernels as extra decompositions that call
    torch.ops.autotuned (autotuned/ops.py), so they too are timed as the code
    that runs; they need CUDA tensors and a registered P2PGroup, and are
    left out (logged once) otherwise;
  * the functional collectives of the winner inlined here are this
    selection's code, not selections of their own (_functional.nested).
"""
from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from autotuned.client import candidate
from autotuned.inductor import _functional

log = logging.getLogger("autotuned.inductor")

_OPS_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
_skipped: set[str] = set()


def _matches(key: Any, op_overload: Any, decompositions: Sequence[Callable[..., Any]]) -> bool:
    if key is op_overload or getattr(key, "_opoverload", None) is op_overload:
        return True
    names = {str(getattr(op_overload, "_schema", "")).split("(")[0],
             getattr(op_overload, "__name__", None)}
    if isinstance(key, str) and key in names:
        return True
    return any(key is d or (isinstance(key, str) and key == getattr(d, "__name__", None))
               for d in decompositions)


def _catalogue_decomposition(spec: str) -> Callable[..., Any]:
    """A decomposition that runs the daemon's implementation `spec` through
    torch.ops.autotuned, in this process."""
    c = candidate(spec)
    collective = c.impl.split("/", 1)[0]
    params = dict(c.params)

    def run(x: Any, **_: Any) -> Any:
        import torch

        op = getattr(torch.ops.autotuned, collective)
        blocks, threads = params.get("blocks", 0), params.get("threads", 0)
        if collective == "all_reduce":
            return op(x, c.impl, "", blocks, threads, params.get("chunk_kib", 0), "sum")
        if collective == "reduce_scatter":
            return op(x, c.impl, "", blocks, threads, "sum")
        return op(x, c.impl, "", blocks, threads)

    run.__name__ = "autotuned_" + re.sub(r"\W", "_", spec)
    return run


def _extras(impls: Mapping[Any, Sequence[str]], op_overload: Any,
            decompositions: Sequence[Callable[..., Any]], inputs: Sequence[Any]
            ) -> list[Callable[..., Any]]:
    specs: list[str] = []
    for key, values in impls.items():
        if _matches(key, op_overload, decompositions):
            specs.extend(v for v in values if v not in specs)
    if not specs:
        return []
    from autotuned import ops

    device = inputs[0].get_device()
    why = ""
    if device is None or device.type != "cuda":
        why = f"they need CUDA tensors (this op's are on {device})"
    elif not ops.group_names():
        why = "no P2PGroup is registered (autotuned.kernels.P2PGroup(pg))"
    elif any(s.split("/", 1)[0] not in _OPS_COLLECTIVES for s in specs):
        why = f"torch.ops.autotuned runs only {', '.join(_OPS_COLLECTIVES)}"
    if why:
        message = f"daemon kernels {specs} left out of {op_overload}: {why}"
        if message not in _skipped:
            _skipped.add(message)
            log.warning("autotuned: %s", message)
        return []
    ops.register_ops()
    return [_catalogue_decomposition(s) for s in specs]


def autotune_custom_op(original: Callable[..., Any], impls: Mapping[Any, Sequence[str]],
                       name: str, decompositions: list[Callable[..., Any]], inputs: list[Any],
                       non_tensor_args: list[dict[str, Any]], op_overload: Any,
                       *args: Any, **kwargs: Any) -> Any:
    """custom_op.autotune_custom_op while enabled (module docstring)."""
    from torch._inductor.select_algorithm import extern_kernels

    for node in inputs:
        node.realize()
    fallback_name = f"{name}_fallback_default"
    if hasattr(extern_kernels, fallback_name):
        # Registered by an earlier selection; the generated code calls the op
        # itself (FallbackKernel), not this attribute.
        delattr(extern_kernels, fallback_name)
    try:
        extra = _extras(impls, op_overload, decompositions, inputs)
    except Exception as e:  # noqa: BLE001 - the op's own choices still compile
        log.warning("autotuned: daemon kernels left out of %s: %s: %s", op_overload,
                    type(e).__name__, e)
        extra = []
    # The winner inlined here is this selection's: its functional
    # collectives are not selections of their own.
    with _functional.nested():
        return original(name, list(decompositions) + extra, inputs,
                        list(non_tensor_args) + [{} for _ in extra], op_overload, *args,
                        **kwargs)
