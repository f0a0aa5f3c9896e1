"""What a rank's compiles did, recorded by the Inductor tests inside each
rank's process (ranks.py): every compiled graph that ran, and every
per-rank Tune the integration sent.

    codes, graphs = [], []
    undo = graph_runs(codes, graphs)   # CompiledFxGraph.__call__ recorded
    tunes = []
    undo_tunes = tune_labels(tunes)    # autotuned.rankrun.tune_rank recorded
"""
from __future__ import annotations

from typing import Any, Callable, Optional


def graph_runs(codes: list, graphs: Optional[list] = None) -> Callable[[], None]:
    """Appends the generated code of each compiled graph that runs to
    `codes` (and the graph itself to `graphs`); returns what undoes it."""
    from torch._inductor.output_code import CompiledFxGraph

    original = CompiledFxGraph.__call__

    def recorded(self: Any, inputs: Any) -> Any:
        codes.append(self.source_code)
        if graphs is not None:
            graphs.append(self)
        return original(self, inputs)

    CompiledFxGraph.__call__ = recorded  # type: ignore[method-assign]

    def undo() -> None:
        CompiledFxGraph.__call__ = original  # type: ignore[method-assign]
    return undo


def tune_labels(tunes: list) -> Callable[[], None]:
    """Appends the problem labels of each per-rank Tune to `tunes`; returns
    what undoes it."""
    import autotuned.rankrun as rankrun

    original = rankrun.tune_rank

    def counted(group: Any, problems: Any, **kwargs: Any) -> Any:
        tunes.append([p.problem.label for p in problems])
        return original(group, problems, **kwargs)

    rankrun.tune_rank = counted

    def undo() -> None:
        rankrun.tune_rank = original
    return undo
