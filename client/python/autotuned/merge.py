"""Which candidate a size table uses at each size, from the daemon's
per-size answers: the fewest ranges such that no range's candidate is
measurably slower than another candidate at any size inside it.

    picks = table_picks(results)      # results: ProblemResults, ascending sizes
    # picks[k]: index in the candidates of the implementation for size k (-1: none)

Per size, each working candidate stands against that size's winner as an
interval of its time ratio (1.05 = 5 % slower), read from the answer:
  * paired by pass (`vs_winner_low`..`vs_winner_high`, 99 %; `paired` > 0);
  * else from the two candidates' own median intervals (95 %):
    [low / winner's high, high / winner's low];
  * else (a daemon that predates intervals) the ratio of the medians alone.
The winner is [1, 1]. Candidate a is measurably slower than b at that size
when a's interval lies wholly above b's (so a's low end is above 1 against
the winner): such an a is never used there, whatever the daemon's margin
kept (a winner kept below the margin is replaced by the faster one), and
the margin licenses nothing either way. The rest are tied at that size.

The table then uses, at each size, a candidate that is allowed there (not
measurably slower than any other) and that wins some size, or that is the
fastest allowed one where the size's winner is not allowed; among the
assignments with the fewest ranges it takes the one nearest the point
estimates (the sum over sizes of log(ratio over the size's fastest)), then
the earlier candidates. So a winner that alternates with a tied neighbour
(A B A B) becomes one range, a crossover where each side is measurably
faster on its sizes stays, and request order decides nothing that the
estimates can. Sizes without measurements (FALLBACK) keep their answer's
winner, sizes without a winner (FAILED) have none (-1). Pure: the same
answers give the same picks on every rank.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from autotuned._proto import autotuned_pb2 as pb


@dataclasses.dataclass(frozen=True)
class Standing:
    """A candidate against its size's winner: time ratio interval and point."""

    low: float
    point: float
    high: float

    def slower_than(self, other: Standing) -> bool:
        """Measurably slower: this interval lies wholly above the other's."""
        return self.low > other.high


def standings(result: pb.ProblemResult) -> dict[int, Standing]:
    """Each working candidate's Standing by index; empty without a measured
    winner (FALLBACK, FAILED, or no times)."""
    if result.status not in (pb.TUNED, pb.CACHED):
        return {}
    ok = {c.index: c for c in result.ranked
          if c.ok and math.isfinite(c.median_us) and c.median_us > 0}
    w = ok.get(result.winner_index)
    if w is None:
        return {}
    out: dict[int, Standing] = {}
    for i, c in ok.items():
        if i == w.index:
            out[i] = Standing(1.0, 1.0, 1.0)
        elif c.paired > 0 and 0 < c.vs_winner_low <= c.vs_winner_high:
            out[i] = Standing(c.vs_winner_low, c.vs_winner or c.median_us / w.median_us,
                              c.vs_winner_high)
        elif 0 < w.median_low_us <= w.median_high_us and \
                0 < c.median_low_us <= c.median_high_us:
            out[i] = Standing(c.median_low_us / w.median_high_us, c.median_us / w.median_us,
                              c.median_high_us / w.median_low_us)
        else:
            point = c.median_us / w.median_us
            out[i] = Standing(point, point, point)
    return out


def allowed(stand: dict[int, Standing]) -> set[int]:
    """The candidates not measurably slower than any other."""
    if not stand:
        return set()
    ceiling = min(s.high for s in stand.values())
    return {i for i, s in stand.items() if s.low <= ceiling}


def slower_picks(results: Sequence[pb.ProblemResult], picks: Sequence[int]) -> list[int]:
    """The sizes whose pick is measurably slower than another candidate
    there (what table_picks never returns): for checks and tests."""
    bad = []
    for k, (r, i) in enumerate(zip(results, picks)):
        stand = standings(r)
        if stand and i >= 0 and (i not in stand or
                                 any(stand[i].slower_than(s) for s in stand.values())):
            bad.append(k)
    return bad


def table_picks(results: Sequence[pb.ProblemResult]) -> list[int]:
    """The candidate index to use at each size (see the module docstring)."""
    stands = [standings(r) for r in results]
    fixed = [(r.winner_index if r.winner and r.status != pb.FAILED else -1) for r in results]
    ok_sets = [allowed(s) if s else ({fixed[k]} if fixed[k] >= 0 else set())
               for k, s in enumerate(stands)]
    pool = {fixed[k] for k in range(len(results)) if fixed[k] in ok_sets[k]}
    for k, s in enumerate(stands):
        if s and fixed[k] not in ok_sets[k]:
            pool.add(min(ok_sets[k], key=lambda i: (s[i].point, i)))
    picks = [-1] * len(results)
    k = 0
    while k < len(results):
        if not ok_sets[k]:
            k += 1
            continue
        end = k
        while end < len(results) and ok_sets[end]:
            end += 1
        picks[k:end] = _fewest_ranges(stands[k:end], ok_sets[k:end], pool)
        k = end
    return picks


def _cost(stand: dict[int, Standing], i: int) -> float:
    if not stand:
        return 0.0
    best = min(s.point for s in stand.values())
    return math.log(stand[i].point / best) if best > 0 and stand[i].point > 0 else 0.0


def _fewest_ranges(stands: Sequence[dict[int, Standing]], ok_sets: Sequence[set[int]],
                   pool: set[int]) -> list[int]:
    """A shortest path over (size, candidate): one range more per change of
    candidate, then the estimates' cost, then the candidate order."""
    choices = [sorted((ok & pool) or ok) for ok in ok_sets]
    # best[i] = (ranges, cost, path) of the cheapest assignment ending in i.
    best: dict[int, tuple[int, float, list[int]]] = {
        i: (1, _cost(stands[0], i), [i]) for i in choices[0]}
    for k in range(1, len(stands)):
        nxt: dict[int, tuple[int, float, list[int]]] = {}
        for i in choices[k]:
            here = _cost(stands[k], i)
            options = [(r + (p != i), c + here, path) for p, (r, c, path) in best.items()]
            r, c, path = min(options, key=lambda o: (o[0], o[1], o[2]))
            nxt[i] = (r, c, path + [i])
        best = nxt
    return min(best.values(), key=lambda o: (o[0], o[1], o[2]))[2]
