"""The code a client candidate runs in this rank: a choice of a collective
selection, run as PyTorch 2.11's own collective benchmark runs it.

select_algorithm.AlgorithmSelectorCache.benchmark_collective_choice times
`choice.benchmark_collective(*inputs, out=output)` on the tensors of
AutotuneArgs.get_benchmark_tensors(extern=True) (choices of custom ops are
all "extern" there). That call drops a SubgraphChoiceCaller's result (its
compiled module returns it) and an out-less extern kernel's: the runner here
makes the same call and keeps the result, for the round's check against the
reference. Each runner's prepare (called by tune_rank before the Tune is
sent, outside the round's bounds; for an ask the daemon's cache answered
before, only if a run comes after all: _answered) makes the selection's
inputs once and compiles the choice's subgraph module
(SubgraphChoiceCaller._compile_for_benchmarking, what 2.11's
benchmark_collective compiles on its first call), so that a step of the
round only runs it.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Optional


class SelectionInputs:
    """AlgorithmSelectorCache.get_inputs of one selection, made on first use."""

    def __init__(self, choices: Sequence[Any], input_nodes: Sequence[Any], layout: Any,
                 input_gen_fns: Any, hint_override: Optional[int]) -> None:
        self._args = (list(choices), list(input_nodes), layout, input_gen_fns)
        self._hint = hint_override
        self._tensors: Optional[tuple[list[Any], Any]] = None

    def get(self) -> tuple[list[Any], Any]:
        if self._tensors is None:
            from torch._inductor.select_algorithm import AlgorithmSelectorCache

            args = AlgorithmSelectorCache.get_inputs(*self._args, hint_override=self._hint)
            inputs, output = args.get_benchmark_tensors(extern=True).unpack()
            self._tensors = (list(inputs), output)
        return self._tensors


def _single(result: Any) -> Any:
    if isinstance(result, (list, tuple)) and len(result) == 1:
        return result[0]
    return result


def _compile(choice: Any) -> None:
    """What SubgraphChoiceCaller.benchmark_collective compiles on its first
    call, kept on the choice."""
    if choice._compiled_module is None:
        choice._compiled_module = choice._compile_for_benchmarking()


def _run_subgraph(choice: Any, inputs: list[Any]) -> Any:
    # SubgraphChoiceCaller.benchmark_collective, keeping what the module returns.
    _compile(choice)
    return _single(choice._compiled_module.call([*choice.sym_input_values, *inputs]))


def runner(choice: Any, inputs: SelectionInputs) -> Any:
    """The RankCandidate of one choice."""
    from torch._dispatch.python import no_python_dispatcher

    from autotuned.rankrun import RankCandidate

    out: list[Any] = []

    def run() -> Any:
        tensors, output = inputs.get()
        # Inside compilation PyTorch's Python dispatcher is on; a gloo
        # collective enqueued through it can deadlock with gloo's worker
        # thread (see autotuned/group.py): run the candidate with it off.
        with no_python_dispatcher():
            if getattr(choice, "gm", None) is not None:
                return _run_subgraph(choice, tensors)
            if not getattr(choice, "has_out_variant", False):
                return _single(choice.to_callable()(*tensors))
            if not out:
                out.append(output.clone())
            choice.benchmark_collective(*tensors, out=out[0])
            return None

    def prepare() -> None:
        inputs.get()
        if getattr(choice, "gm", None) is not None:
            _compile(choice)

    output_fn: Callable[[], Any] = lambda: out[0]  # noqa: E731
    return RankCandidate(run=run, output=output_fn, prepare=prepare)
