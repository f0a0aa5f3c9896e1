"""Charts of a sweep: one line per candidate against message size.

    python -m autotuned.plot sweep.csv -o sweep.png            # median time (us) per size
    python -m autotuned.plot sweep.jsonl -o bw.png --busbw     # bus bandwidth (GB/s) per size

Input: `autotunectl --csv sweep` (one row per candidate per size), `autotunectl
--json sweep` or DispatchTable.write_jsonl (one SweepUpdate a line), or, from
Python, the per-size results of Client.sweep_table (points_from_results).
The x axis is the size in bytes (log 2), the y axis the median time in
microseconds or the bus bandwidth in GB/s as nccl-tests computes it (log
10 for time); every candidate has its own colour however many there are,
and the legend names each in full; a ring marks each size's winner.
Needs matplotlib (`pip install 'autotuned[plot]'`); the rest of the
package does not.
"""
from __future__ import annotations

import argparse
import csv
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from autotuned._proto import autotuned_pb2 as pb
from autotuned.client import candidate_spec, collective_name, dtype_bytes

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Point:
    """One candidate's figures at one size (only candidates that worked)."""
    bytes: int
    candidate: str
    median_us: float
    busbw_gbps: float
    won: bool


@dataclass
class Sweep:
    """The points of a sweep and what it measured, for the title."""
    points: list[Point]
    collective: str = ""
    dtype: str = ""


def points_from_results(results: Iterable[pb.ProblemResult]) -> Sweep:
    """The points of ProblemResults (a sweep's sizes): the size is the
    problem's count in bytes, as autotunectl's sweep table and CSV show it."""
    sweep = Sweep(points=[])
    for r in results:
        p = r.problem
        size = p.count * dtype_bytes(p.dtype) if p.dtype else r.bytes
        sweep.collective = sweep.collective or collective_name(p.collective)
        sweep.dtype = sweep.dtype or pb.DType.Name(p.dtype).lower()
        has_winner = bool(r.winner) and r.status != pb.FAILED
        for c in r.ranked:
            if c.ok:
                sweep.points.append(Point(size, candidate_spec(c.candidate), c.median_us,
                                          c.busbw_gbps,
                                          has_winner and c.index == r.winner_index))
    return sweep


def read_csv(lines: Iterable[str]) -> Sweep:
    """`autotunectl --csv sweep`'s rows (header first); rows with ok=0 are skipped."""
    sweep = Sweep(points=[])
    for row in csv.DictReader(lines):
        sweep.collective = sweep.collective or row["collective"]
        sweep.dtype = sweep.dtype or row["dtype"]
        if row["ok"] == "1":
            sweep.points.append(Point(int(row["bytes"]), row["candidate"],
                                      float(row["median_us"]), float(row["busbw_gbps"] or 0),
                                      row["won"] == "1"))
    return sweep


def read_jsonl(lines: Iterable[str]) -> Sweep:
    """SweepUpdates in JSON, one a line (the table's line and blank lines skipped)."""
    from google.protobuf import json_format

    results = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        update = pb.SweepUpdate()
        try:
            json_format.Parse(line, update)
        except json_format.ParseError as e:
            raise ValueError(f"line {n}: not a SweepUpdate in JSON: {e}") from None
        if update.HasField("size_result"):
            results.append(update.size_result)
    return points_from_results(results)


def read(path: str) -> Sweep:
    """A sweep saved as CSV or JSON lines, told apart by the first character."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    first = next((line for line in lines if line.strip()), "")
    return read_jsonl(lines) if first.lstrip().startswith("{") else read_csv(lines)


def colours(n: int) -> list[tuple[float, float, float]]:
    """n distinct colours: tab10 or tab20 while they suffice, else n hues
    spread evenly over a perceptually ordered map (no colour used twice)."""
    from matplotlib import colormaps

    if n <= 10:
        return [colormaps["tab10"](i)[:3] for i in range(n)]
    if n <= 20:
        return [colormaps["tab20"](i)[:3] for i in range(n)]
    return [colormaps["turbo"](0.05 + 0.9 * i / (n - 1))[:3] for i in range(n)]


def draw(sweep: Sweep, *, busbw: bool = False, title: Optional[str] = None) -> Figure:
    """The chart: a line per candidate (in the order of their names, numbers
    by value: ring:chunk_kib=4 before chunk_kib=16), the winner of each size
    ringed in black."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    names = sorted({p.candidate for p in sweep.points}, key=_natural)
    if not names:
        raise ValueError("no measured candidate in the sweep")
    # The plot keeps its 8 x 6 in; the legend beside it widens the figure
    # to fit the longest name in full.
    legend_in = 0.6 + 0.065 * max(len(n) for n in names) * (1 if len(names) <= 24 else 2)
    fig = Figure(figsize=(8 + legend_in, 6), layout="constrained")
    ax = fig.add_subplot()
    markers = "os^vD<>pP*Xh"
    for i, (name, colour) in enumerate(zip(names, colours(len(names)))):
        pts = sorted((p for p in sweep.points if p.candidate == name), key=lambda p: p.bytes)
        ys = [p.busbw_gbps if busbw else p.median_us for p in pts]
        ax.plot([p.bytes for p in pts], ys, color=colour, marker=markers[i % len(markers)],
                markersize=4, linewidth=1.5, label=name)
    won = [p for p in sweep.points if p.won]
    ax.scatter([p.bytes for p in won], [p.busbw_gbps if busbw else p.median_us for p in won],
               s=120, facecolors="none", edgecolors="black", linewidths=1.2,
               label="winner at that size", zorder=3)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: short_bytes(v)))
    ax.set_yscale("linear" if busbw else "log")
    ax.set_xlabel("message size (bytes; log 2 scale)")
    ax.set_ylabel("bus bandwidth (GB/s)" if busbw else "median time (µs; log scale)")
    what = "bus bandwidth" if busbw else "median time"
    ax.set_title(title or f"{sweep.collective} {sweep.dtype}: {what} per size".strip())
    ax.grid(True, which="major", alpha=0.4)
    ax.grid(True, which="minor", alpha=0.15)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small",
              ncol=1 if len(names) <= 24 else 2, frameon=False)
    return fig


def _natural(name: str) -> list[tuple[int, str]]:
    return [(int(t), "") if t.isdigit() else (-1, t) for t in re.split(r"(\d+)", name)]


def short_bytes(v: float) -> str:
    """1024 -> "1K", 1048576 -> "1M": the x axis' tick labels."""
    for unit in ("", "K", "M", "G"):
        if abs(v) < 1024 or unit == "G":
            return f"{v:g}{unit}" if unit else f"{v:g}B"
        v /= 1024
    return f"{v:g}G"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autotuned.plot",
        description="Draws a sweep saved by `autotunectl --csv sweep` or `autotunectl --json "
                    "sweep` (or DispatchTable.write_jsonl) as a PNG (or .svg, .pdf).")
    parser.add_argument("input", help="the saved sweep: CSV or JSON lines")
    parser.add_argument("-o", "--output", required=True, help="the chart's file")
    parser.add_argument("--busbw", action="store_true",
                        help="bus bandwidth (GB/s) instead of median time (us)")
    parser.add_argument("--title", help="instead of '<collective> <dtype>: ...'")
    args = parser.parse_args(argv)
    try:
        sweep = read(args.input)
        fig = draw(sweep, busbw=args.busbw, title=args.title)
    except ImportError as e:
        print(f"autotuned.plot: needs matplotlib ({e}): install the package's plot extra, "
              "pip install 'autotuned[plot]' (docs/python.md)", file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:
        print(f"autotuned.plot: {args.input}: {e}", file=sys.stderr)
        return 1
    except KeyError as e:
        print(f"autotuned.plot: {args.input}: no field {e}", file=sys.stderr)
        return 1
    try:
        fig.savefig(args.output, dpi=110)
    except (OSError, ValueError) as e:
        print(f"autotuned.plot: --output {args.output}: {e}", file=sys.stderr)
        return 1
    print(f"{args.output}: {len({p.candidate for p in sweep.points})} candidates, "
          f"{len({p.bytes for p in sweep.points})} sizes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
