"""autotuned.check on CPU: every correct order of a sum of 2, 4 and 8 ranks'
data (random, mixed signs, several magnitudes, ranks of very different
scales) passes against every other, in bfloat16, float16 and float32, for
all_reduce's whole output and for reduce_scatter's shard; wrong results (one
rank's contribution missing, twice the sum, the mean, garbage or zeros in one
block of 64 elements, one element far off) are caught; integer-valued data
compared exactly; NaN and infinities where the reference has them only.
"""
from __future__ import annotations

import itertools
import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from timeout_guard import guard  # noqa: E402

from autotuned import pb  # noqa: E402
from autotuned.check import bound, same_output, terms_of  # noqa: E402
from autotuned.errors import InvalidArgument  # noqa: E402

torch.set_num_threads(1)   # 4096-element tensors: threads cost more than they give

DTYPES = [torch.bfloat16, torch.float16, torch.float32]
WORLDS = [2, 4, 8]
SEEDS = range(50)
COUNT = 4096   # elements per rank's input (all_reduce's output)
BLOCK = 64
# The unit roundoff: 2^-(significand bits).
UNIT = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11, torch.float32: 2.0 ** -24,
        torch.float64: 2.0 ** -53}
# A wider type for "accumulate wide, round once".
WIDE = {torch.bfloat16: torch.float32, torch.float16: torch.float32,
        torch.float32: torch.float64}


@pytest.fixture(autouse=True)
def deadline():
    with guard(300):
        yield


def rank_inputs(seed: int, world: int, dtype: torch.dtype) -> list[torch.Tensor]:
    """Each rank's input: randn times a per-rank scale. By seed: a magnitude
    (1e-3 .. 1e3, and 1e-20 and 1e20 where the dtype reaches), and the same
    scale on every rank, scales spread over six decades, or one rank 1000
    times the others."""
    g = torch.Generator().manual_seed(seed * 1000 + world * 10 + DTYPES.index(dtype))
    # float16 keeps sums of 8 ranks below its largest value (65504), and its
    # data above its subnormals (6e-5).
    mags = [1e-3, 1.0, 1e3] if dtype == torch.float16 else [1e-20, 1e-3, 1.0, 1e3, 1e20]
    base = mags[seed % len(mags)]
    mode = (seed // len(mags)) % 3
    if mode == 0:
        scales = [base] * world
    elif mode == 1:
        scales = [base * 10.0 ** float(torch.empty(1).uniform_(-3, 3, generator=g))
                  for _ in range(world)]
    else:
        scales = [base * (1000.0 if r == seed % world else 1.0) for r in range(world)]
    if dtype == torch.float16:
        scales = [min(max(s, 1e-2), 1e3) for s in scales]
    return [(torch.randn(COUNT, generator=g, dtype=torch.float64) * s).to(dtype)
            for s in scales]


def left_to_right(xs):
    acc = xs[0].clone()
    for x in xs[1:]:
        acc = acc + x          # rounded to the dtype at each step
    return acc


def right_to_left(xs):
    return left_to_right(xs[::-1])


def pairwise(xs):
    while len(xs) > 1:
        xs = [xs[i] + xs[i + 1] if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
    return xs[0]


def wide_once(xs):
    dtype = xs[0].dtype
    return torch.stack([x.to(WIDE[dtype]) for x in xs]).sum(0).to(dtype)


def ring(xs):
    """A ring's reduce-scatter: chunk c summed from rank c + 1 around to c."""
    n = len(xs)
    bounds = [len(xs[0]) * c // n for c in range(n + 1)]
    out = torch.empty_like(xs[0])
    for c in range(n):
        lo, hi = bounds[c], bounds[c + 1]
        out[lo:hi] = left_to_right([xs[(c + 1 + k) % n][lo:hi] for k in range(n)])
    return out


def shuffled(xs, seed):
    """Every element in its own random order, left to right."""
    g = torch.Generator().manual_seed(seed)
    stacked = torch.stack(xs)
    order = torch.rand(stacked.shape, generator=g).argsort(dim=0)
    return left_to_right(list(stacked.gather(0, order).unbind(0)))


def orderings(xs, seed):
    exact = torch.stack([x.double() for x in xs]).sum(0)
    return {"left_to_right": left_to_right(xs), "right_to_left": right_to_left(xs),
            "pairwise": pairwise(xs), "wide_once": wide_once(xs), "ring": ring(xs),
            "shuffled": shuffled(xs, seed), "exact_rounded": exact.to(xs[0].dtype)}


def shard(t, world, rank):
    n = len(t) // world
    return t[rank * n:(rank + 1) * n]


CASES = list(itertools.product(DTYPES, WORLDS))


def _id(case):
    return f"{str(case[0]).replace('torch.', '')}-{case[1]}ranks"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_every_correct_order_passes_against_every_other(case):
    dtype, world = case
    u, tiny = UNIT[dtype], torch.finfo(dtype).tiny
    differing = 0
    for seed in SEEDS:
        xs = rank_inputs(seed, world, dtype)
        sums = orderings(xs, seed)
        # The orders are sums of these terms: each within (n-1) u of the sum of
        # the terms' magnitudes (with a margin for the rounded partial sums).
        exact = torch.stack([x.double() for x in xs]).sum(0)
        size = torch.stack([x.double().abs() for x in xs]).sum(0)
        for name, s in sums.items():
            err = (s.double() - exact).abs()
            assert bool((err <= 1.1 * world * u * (size + tiny)).all()), (seed, name)
        rank = seed % world
        # The check is symmetric (but for integer-valued references): each
        # pair once.
        for (a_name, a), (b_name, b) in itertools.combinations(sums.items(), 2):
            differing += not torch.equal(a, b)
            why = same_output(a, b, terms=world)
            assert why == "", (seed, a_name, b_name, why)
            why = same_output(shard(a, world, rank), shard(b, world, rank), terms=world)
            assert why == "", ("reduce_scatter", seed, a_name, b_name, why)
    # The orders do differ (else the test would prove nothing); with 2 terms
    # a + b == b + a, and every order rounds once.
    assert differing > 0 if world > 2 else differing == 0


def test_the_fixed_tolerance_rejected_what_the_bound_accepts():
    """bfloat16 sums of 4 ranks in two orders: torch.allclose with the former
    fixed rtol 1.6e-2, atol 1e-2 rules out some of them, the bound none."""
    rejected = 0
    for seed in SEEDS:
        xs = rank_inputs(seed, 4, torch.bfloat16)
        a, b = left_to_right(xs), ring(xs)
        rejected += not torch.allclose(a.double(), b.double(), rtol=1.6e-2, atol=1e-2)
        assert same_output(a, b, terms=4) == "", seed
    assert rejected > 0


def wrong_results(xs, seed, ref):
    """Wrong outputs of the sum of xs (ref: a correct one), by name."""
    g = torch.Generator().manual_seed(seed)
    dtype, n = ref.dtype, len(xs)
    exact = torch.stack([x.double() for x in xs]).sum(0)
    largest = max(range(n), key=lambda r: float(xs[r].double().abs().max()))
    block = int(torch.randint(0, len(ref) // BLOCK, (1,), generator=g)) * BLOCK
    at = int(torch.randint(0, len(ref), (1,), generator=g))

    def with_block(values):
        out = ref.clone()
        out[block:block + BLOCK] = values
        return out

    off = ref.double()
    off[at] += float(exact.abs().max())
    bits = torch.randint(-2 ** 15, 2 ** 15, (BLOCK,), generator=g, dtype=torch.int16)
    if dtype == torch.float32:
        bits = torch.randint(-2 ** 31, 2 ** 31, (BLOCK,), generator=g, dtype=torch.int32)
    return {
        "a rank missing": left_to_right(xs[:largest] + xs[largest + 1:]),
        "twice the sum": (exact * 2).to(dtype),
        "the mean": wide_once(xs) / n,
        "zeros in a block": with_block(0.0),
        "random values in a block": with_block(
            (torch.randn(BLOCK, generator=g, dtype=torch.float64) * exact.std()).to(dtype)),
        "random bits in a block": with_block(bits.view(dtype)),
        "one element off": off.to(dtype),
    }


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_wrong_results_are_caught(case):
    dtype, world = case
    for seed in SEEDS:
        xs = rank_inputs(seed, world, dtype)
        for ref in (left_to_right(xs), wide_once(xs)):
            for name, out in wrong_results(xs, seed, ref).items():
                assert same_output(out, ref, terms=world) != "", (seed, name)
                assert same_output(ref, out, terms=world) != "", (seed, name, "as reference")
        # reduce_scatter: this rank's shard without the largest rank's part.
        rank = seed % world
        largest = max(range(world), key=lambda r: float(shard(xs[r], world, rank).abs().max()))
        missing = left_to_right(xs[:largest] + xs[largest + 1:])
        assert same_output(shard(missing, world, rank), shard(ring(xs), world, rank),
                           terms=world) != "", seed


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cancelling_inputs_pass_with_the_callers_scale(dtype):
    """x on rank 0 and -x + y on rank 1: the sum is far below its terms, so
    only the caller knows how large the partial sums get (scale); a missing
    rank is still caught."""
    for world, seed in itertools.product([2, 4], range(20)):
        g = torch.Generator().manual_seed(seed)
        big = torch.randn(COUNT, generator=g, dtype=torch.float64) * 100
        xs = [big] + [-big + torch.randn(COUNT, generator=g, dtype=torch.float64)] \
            + [torch.randn(COUNT, generator=g, dtype=torch.float64)
               for _ in range(world - 2)]
        xs = [x.to(dtype) for x in xs]
        scale = max(float(x.double().abs().max()) for x in xs)
        sums = orderings(xs, seed)
        for (a_name, a), (b_name, b) in itertools.combinations(sums.items(), 2):
            why = same_output(a, b, terms=world, scale=scale)
            assert why == "", (world, seed, a_name, b_name, why)
        missing = left_to_right(xs[1:])
        assert same_output(missing, sums["wide_once"], terms=world, scale=scale) != ""


def pattern(rank, count):
    """The daemon's integer test pattern (kernels/pattern.h): 1..16."""
    i = torch.arange(count, dtype=torch.int64)
    return ((i * 7 + rank * 5) % 16 + 1).to(torch.float64)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_integer_valued_data_compared_exactly(dtype):
    for world in WORLDS:
        xs = [pattern(r, COUNT).to(dtype) for r in range(world)]
        sums = orderings(xs, world)
        for a, b in itertools.permutations(sums.values(), 2):
            assert torch.equal(a, b) and same_output(a, b, terms=world) == ""
        off = sums["ring"].clone()
        off[123] += 1
        assert "exact comparison of integer-valued data" in \
            same_output(off, sums["left_to_right"], terms=world)
    ints = torch.arange(10, dtype=torch.int32)
    assert "exact comparison" in same_output(ints + (ints == 3), ints, terms=8)
    # From 1/u on (256 in bfloat16) integers round too: the bound applies,
    # and an ulp apart passes.
    big = torch.tensor([256.0, 2.0], dtype=torch.bfloat16)
    assert same_output(big + torch.tensor([2.0, 0.0], dtype=torch.bfloat16), big, terms=2) == ""
    assert "exact" in same_output(big - torch.tensor([1.0, 0.0], dtype=torch.bfloat16) - 1,
                                  big - 1, terms=2)


def test_nan_and_infinity_only_where_the_reference_has_them():
    ref = torch.tensor([1.5, float("nan"), float("inf"), -2.25])
    assert same_output(ref.clone(), ref, terms=4) == ""
    out = ref.clone()
    out[0] = float("nan")
    assert "not finite" in same_output(out, ref, terms=4)
    assert "not finite" in same_output(ref, out, terms=4)
    out = ref.clone()
    out[1] = 0.0
    assert "not finite" in same_output(out, ref, terms=4)
    out = ref.clone()
    out[2] = -float("inf")
    assert "not finite" in same_output(out, ref, terms=4)
    out = ref.clone()
    out[3] = float("inf")
    assert "not finite" in same_output(out, ref, terms=4)
    # The finite elements still compared, with the infinities left out of
    # the magnitude.
    out = ref.clone()
    out[3] = -1.25
    assert "max abs difference" in same_output(out, ref, terms=4)


def test_terms_per_collective_and_op():
    assert terms_of("all_reduce", 4) == 4
    assert terms_of(pb.REDUCE_SCATTER, 8) == 8
    assert terms_of(pb.ALL_REDUCE, 8, pb.SUM) == 8
    assert terms_of(pb.ALL_REDUCE, 8, pb.REDUCE_OP_UNSPECIFIED) == 8
    assert terms_of(pb.ALL_REDUCE, 8, pb.MAX) == 1
    assert terms_of("reduce_scatter", 8, pb.MIN) == 1
    for copy in ("all_gather", "all_to_all", "broadcast"):
        assert terms_of(copy, 8) == 1
    with pytest.raises(InvalidArgument, match="world_size"):
        terms_of("all_reduce", 0)
    with pytest.raises(InvalidArgument, match="collective"):
        terms_of("all_sum", 2)


def test_bound_follows_the_unit_roundoff_terms_and_magnitude():
    for dtype, u in UNIT.items():
        # (plus 2 u tiny: 1e-4 of it in float16)
        assert bound(dtype, 1, 1.0) == pytest.approx(2 * u, rel=1e-4)
        assert bound(dtype, 8, 1.0) == pytest.approx(8 * bound(dtype, 1, 1.0))
        assert bound(dtype, 4, 1e3) == pytest.approx(1e3 * bound(dtype, 4, 1.0), rel=1e-4)
    x = torch.rand(100, dtype=torch.float64)
    nudged = x * (1 + 4 * UNIT[torch.float64])
    assert "max abs difference" in same_output(nudged, x)          # 1 term: a copy
    assert same_output(nudged, x, terms=4) == ""
    # scale raises the magnitude to terms * scale.
    assert same_output(x + 1e-14, x, terms=2, scale=1e3) == ""
    assert "max abs difference" in same_output(x + 1e-14, x, terms=2)


def test_arguments_checked():
    with pytest.raises(InvalidArgument, match="terms"):
        same_output(torch.ones(2), torch.ones(2), terms=0)
    with pytest.raises(InvalidArgument, match="scale"):
        same_output(torch.ones(2), torch.ones(2), scale=-1.0)
    with pytest.raises(InvalidArgument, match="scale"):
        same_output(torch.ones(2), torch.ones(2), scale=math.nan)


def test_nested_outputs_use_the_same_terms():
    xs = rank_inputs(1, 8, torch.bfloat16)
    a, b = left_to_right(xs), ring(xs)
    assert same_output((a, [a]), (b, [b]), terms=8) == ""
    assert same_output((a, [a * 2]), (b, [b]), terms=8).startswith("[1]: [0]: max abs")
    assert "shape" in same_output(a[:10], b)
