"""Inductor's caches and the daemon's decisions (docs/python.md, "Inductor").

A rank whose compile is served from Inductor's FX graph cache runs no
selection; a rank that compiles afresh asks its daemon. Both end with the
same choice because:
  * a graph is saved to the FX graph cache (and to AOTAutograd's, which
    stores its graphs or refers to them) only when every daemon selection in
    it was TUNED or CACHED: those are what the daemon's cache entry says, and
    the cold rank's ask finds that entry (CACHED at once, nobody waits). A
    graph in which a selection fell back is compiled but not saved
    (FxGraphCache._save_graph and AOTAutogradCache.save skip it);
  * the daemon's cache identity (NodeInfo.cache_epoch: it changes when a
    cached entry is removed; "" when the cache is off; and the fingerprint)
    is part of both caches' keys, through a CustomGraphPass's uuid() in
    config.post_grad_custom_post_pass (FxGraphHashDetails, which
    AOTAutogradCacheDetails extends, hashes it; a user's own pass there is
    kept and run first, its uuid included). A cleared daemon cache makes
    every saved graph a miss;
  * so is what register_custom_op_autotuning put in Inductor's lowerings
    (_registrations(): each op's selection name, its configs'
    decompositions, named and with a digest of their bytecode, and params,
    its config generator and input generators, dispatch_on, split_points
    and range_upper_bound), which 2.11's own key does not cover: without it
    a process that registered other split points or choices was served the
    graph another process compiled with the old ones. What a decomposition
    calls (another function, a closure's value) is not part of it.
Inductor's own autotune cache (select_algorithm's PersistentCache) never
answers a collective selection: the integration's __call__ does not consult
it.
"""
from __future__ import annotations

import logging
from typing import Any, Optional

log = logging.getLogger("autotuned.inductor")

# Reasons a selection fell back, per graph being compiled (innermost last).
_frames: list[list[str]] = []
# Whether a graph with a fallback was compiled since AOTAutograd last saved
# an entry (such graphs themselves carry _UNSAVED).
_UNSAVED = "_autotuned_fallbacks"
_unsaved_since_aot_save = [False]
_originals: dict[str, Any] = {}


def note_fallback(reason: str) -> None:
    """The graph being compiled holds a selection that fell back."""
    if _frames:
        _frames[-1].append(reason)


def _identity(target: str) -> str:
    """The daemon's cache identity, or why it is unknown."""
    from autotuned import channels

    down = channels.down_reason(target)
    if down:
        return "daemon down"
    try:
        info = channels.channel(target).node_info(timeout=2.0)
    except Exception as e:  # noqa: BLE001 - a daemon that does not answer is keyed as such
        return f"daemon unreachable ({type(e).__name__})"
    return f"cache_epoch={info.cache_epoch} fingerprint={info.fingerprint}"


def _code_digest(fn: Any) -> str:
    """A callable's qualified name and a digest of its bytecode (stable
    across processes, unlike the code object's repr)."""
    import hashlib

    code = getattr(fn, "__code__", None)
    name = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', type(fn).__name__)}"
    if code is None:
        return name
    return f"{name}:{hashlib.sha256(code.co_code).hexdigest()[:16]}"


# What _create_autotuning_lowering's closures keep, by free variable.
_REGISTRATION_CELLS = ("name", "split_points", "range_upper_bound", "tensor_name",
                       "dim_index", "ranges")


def _registrations() -> list:
    """Each custom op's register_custom_op_autotuning, as it stands in
    Inductor's lowerings (the wrappers that 2.11's
    _create_autotuning_lowering returns), sorted by op."""
    from torch._inductor.lowering import lowerings

    out = []
    for op, fn in list(lowerings.items()):
        code = getattr(fn, "__code__", None)
        if code is None or code.co_name not in ("standard_lowering_wrapper",
                                                "range_based_lowering_wrapper"):
            continue
        cells = {}
        for var, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                cells[var] = cell.cell_contents
            except ValueError:  # an empty cell
                continue
        configs = [(_code_digest(c.decomposition), repr(sorted(c.params.items())))
                   for c in cells.get("processed_configs") or ()]
        gens = cells.get("input_gen_fns") or {}
        entry = [str(op), code.co_name, configs,
                 _code_digest(cells["config_generator"]) if cells.get("config_generator")
                 else None,
                 sorted((k, _code_digest(v)) for k, v in gens.items())]
        entry += [repr(cells.get(k)) for k in _REGISTRATION_CELLS]
        out.append(entry)
    return sorted(out)


def _key_pass(previous: Any, target: str, settings: str) -> Any:
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class DaemonCacheKey(CustomGraphPass):
        """Changes nothing in the graph (runs the user's pass, if any); its
        uuid puts the daemon's cache identity into Inductor's cache keys."""

        def __call__(self, graph: Any) -> None:
            if previous is not None:
                previous(graph)

        def uuid(self) -> Optional[Any]:
            theirs = previous.uuid() if previous is not None else None
            # Whether functional collectives are tuned: enable()'s setting,
            # and functional_off() around this compile.
            from autotuned.inductor import _functional

            return ("autotuned.inductor", settings, _functional.key(), _identity(target),
                    repr(_registrations()), theirs)

    return DaemonCacheKey()


def _fx_codegen_and_compile(*args: Any, **kwargs: Any) -> Any:
    _frames.append([])
    try:
        out = _originals["fx_codegen_and_compile"](*args, **kwargs)
    finally:
        reasons = _frames.pop()
    if reasons:
        setattr(out, _UNSAVED, reasons)
        _unsaved_since_aot_save[0] = True
    return out


def _save_graph(key: str, compiled_graph: Any, *args: Any, **kwargs: Any) -> None:
    if getattr(compiled_graph, _UNSAVED, None):
        log.info("autotuned: graph not saved to Inductor's FX graph cache: a collective "
                 "selection in it fell back")
        return
    _originals["_save_graph"](key, compiled_graph, *args, **kwargs)


def _aot_save(key: str, entry: Any, remote: bool) -> None:
    unsaved, _unsaved_since_aot_save[0] = _unsaved_since_aot_save[0], False
    if unsaved:
        log.info("autotuned: entry not saved to AOTAutograd's cache: a collective "
                 "selection in its graphs fell back")
        return
    _originals["aot_save"](key, entry, remote)


def install(target: str, settings: str) -> None:
    """Puts the daemon's identity into Inductor's cache keys and keeps graphs
    with a fallback out of its caches (module docstring)."""
    import torch._inductor.compile_fx as compile_fx
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache
    from torch._inductor import config
    from torch._inductor.codecache import FxGraphCache

    if not _originals:
        _originals.update(
            fx_codegen_and_compile=compile_fx.fx_codegen_and_compile,
            _save_graph=FxGraphCache.__dict__["_save_graph"].__func__,
            aot_save=AOTAutogradCache.__dict__["save"].__func__,
            post_grad_custom_post_pass=config.post_grad_custom_post_pass)
    compile_fx.fx_codegen_and_compile = _fx_codegen_and_compile
    FxGraphCache._save_graph = staticmethod(_save_graph)  # type: ignore[method-assign]
    AOTAutogradCache.save = staticmethod(_aot_save)  # type: ignore[method-assign]
    config.post_grad_custom_post_pass = _key_pass(
        _originals["post_grad_custom_post_pass"], target, settings)


def uninstall() -> None:
    """Restores what install() replaced."""
    import torch._inductor.compile_fx as compile_fx
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache
    from torch._inductor import config
    from torch._inductor.codecache import FxGraphCache

    if not _originals:
        return
    compile_fx.fx_codegen_and_compile = _originals["fx_codegen_and_compile"]
    FxGraphCache._save_graph = staticmethod(  # type: ignore[method-assign]
        _originals["_save_graph"])
    AOTAutogradCache.save = staticmethod(_originals["aot_save"])  # type: ignore[method-assign]
    config.post_grad_custom_post_pass = _originals["post_grad_custom_post_pass"]
    _originals.clear()
