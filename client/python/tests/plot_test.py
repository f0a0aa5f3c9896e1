"""autotuned.plot: a sweep's chart from the client's results and from what
autotunectl saves (--csv and --json sweep on a sim daemon), through the
module's command line."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from autotuned import pb, problem
from autotuned import plot as aplot

sys.path.insert(0, os.path.dirname(__file__))
from daemon_fixture import Daemon  # noqa: E402
from timeout_guard import guard  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def deadline():
    with guard(120):
        yield


def synthetic(n_candidates: int, sizes: list[int]) -> list[pb.ProblemResult]:
    """ProblemResults of all_reduce float32, candidate i taking (i + 1) us
    per KiB; the fastest, candidate 0, wins every size."""
    names = [f"all_reduce/ring:chunk_kib={4 << i}" for i in range(n_candidates)]
    out = []
    for size in sizes:
        p = problem("all_reduce", "float32", count=size // 4, candidates=names)
        ranked = [pb.CandidateResult(candidate=p.candidates[i], index=i, ok=True,
                                     median_us=(i + 1) * size / 1024, busbw_gbps=size / (i + 1))
                  for i in range(n_candidates)]
        out.append(pb.ProblemResult(problem=p, status=pb.TUNED, winner=names[0], winner_index=0,
                                    ranked=ranked, bytes=size))
    return out


@pytest.mark.parametrize("busbw", [False, True])
def test_every_candidate_has_its_colour_and_full_name(busbw):
    results = synthetic(25, [1024 << k for k in range(6)])
    sweep = aplot.points_from_results(results)
    fig = aplot.draw(sweep, busbw=busbw)
    ax = fig.axes[0]
    names = [c.candidate.impl + ":chunk_kib=" + str(c.candidate.params["chunk_kib"])
             for c in results[0].ranked]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sorted(legend[:-1]) == sorted(names) and legend[-1] == "winner at that size"
    assert legend[:3] == names[:3]  # chunk_kib=4, 8, 16: numbers in order of value
    lines = ax.get_lines()
    assert len(lines) == 25 and all(len(line.get_xdata()) == 6 for line in lines)
    assert len({tuple(line.get_color()) for line in lines}) == 25
    assert ax.get_xscale() == "log" and ax.get_yscale() == ("linear" if busbw else "log")
    assert "bytes" in ax.get_xlabel()
    assert ("GB/s" if busbw else "µs") in ax.get_ylabel()
    assert ax.get_title().startswith("all_reduce float32: ")


@pytest.mark.parametrize("n", [1, 9, 10, 11, 20, 21, 64])
def test_colours_never_repeat(n):
    assert len(set(aplot.colours(n))) == n


def test_failed_candidates_and_sizes_are_left_out():
    results = synthetic(3, [1024, 2048])
    results[0].ranked[2].ok = False
    results[1].status = pb.FAILED
    sweep = aplot.points_from_results(results)
    assert len(sweep.points) == 5
    assert [p.bytes for p in sweep.points if p.won] == [1024]


def test_short_bytes():
    assert [aplot.short_bytes(v) for v in (512, 1024, 1536, 1 << 20, 1 << 30, 1 << 32)] == \
        ["512B", "1K", "1.5K", "1M", "1G", "4G"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autotuned.plot", *args],
                          capture_output=True, text=True, timeout=60)


def test_autotunectl_csv_and_json_drawn_alike(tmp_path):
    """What autotunectl saves from a real sweep: the CSV and the JSON lines
    read as the same points, and the command line draws both."""
    d = Daemon()
    try:
        sweep = ["sweep", "--collective=all_reduce", "--from=1KiB", "--to=4KiB",
                 "--warmup=1", "--iters=3", f"--socket={d.socket}"]
        for fmt in ("csv", "json"):
            done = subprocess.run([os.environ["AUTOTUNED_CTL"], f"--{fmt}", *sweep],
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            (tmp_path / f"s.{fmt}").write_text(done.stdout)
    finally:
        d.stop()
    from_csv, from_json = aplot.read(str(tmp_path / "s.csv")), aplot.read(str(tmp_path / "s.json"))
    key = [(p.bytes, p.candidate, p.won) for p in from_csv.points]
    assert key == [(p.bytes, p.candidate, p.won) for p in from_json.points]
    assert sorted({p.bytes for p in from_csv.points}) == [1024, 2048, 4096]
    assert len({p.candidate for p in from_csv.points}) == 5  # the sim's all_reduce catalogue
    assert sum(p.won for p in from_csv.points) == 3
    for p, q in zip(from_csv.points, from_json.points):
        assert p.median_us == pytest.approx(q.median_us, abs=1e-3)
    for fmt, extra in (("csv", []), ("json", ["--busbw"])):
        out = tmp_path / f"{fmt}.png"
        done = run_cli(str(tmp_path / f"s.{fmt}"), "-o", str(out), *extra)
        assert done.returncode == 0, done.stderr
        assert out.read_bytes()[:8] == PNG_MAGIC
        assert "5 candidates, 3 sizes" in done.stdout


def test_bad_input_is_named(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"size_result": {"nope": 1}}\n')
    done = run_cli(str(bad), "-o", str(tmp_path / "x.png"))
    assert done.returncode == 1 and "line 1: not a SweepUpdate" in done.stderr
    assert not (tmp_path / "x.png").exists()
    empty = tmp_path / "empty.csv"
    empty.write_text("bytes,collective,dtype,candidate,rank,won,ok,median_us,busbw_gbps\n")
    done = run_cli(str(empty), "-o", str(tmp_path / "x.png"))
    assert done.returncode == 1 and "no measured candidate" in done.stderr
    missing = tmp_path / "missing.csv"
    done = run_cli(str(missing), "-o", str(tmp_path / "x.png"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"autotuned.plot: {missing}: ") and "No such file" in done.stderr


def test_a_chart_that_cannot_be_written_is_named(tmp_path):
    """An output whose format matplotlib does not know, or whose folder is
    missing: one line naming --output, no traceback, nothing written."""
    saved = tmp_path / "s.csv"
    saved.write_text("bytes,collective,dtype,candidate,rank,won,ok,median_us,busbw_gbps\n"
                     "1024,all_reduce,float32,all_reduce/one_shot,1,1,1,5.0,0.2\n")
    for out, why in ((tmp_path / "chart.bogus", "Format 'bogus' is not supported"),
                     (tmp_path / "no" / "chart.png", "No such file")):
        done = run_cli(str(saved), "-o", str(out))
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith(f"autotuned.plot: --output {out}: ") and why in done.stderr
        assert not out.exists()


def test_without_matplotlib_the_extra_is_named(tmp_path, monkeypatch, capsys):
    """The wheel without its plot extra: what to install, not an ImportError."""
    saved = tmp_path / "s.csv"
    saved.write_text("bytes,collective,dtype,candidate,rank,won,ok,median_us,busbw_gbps\n"
                     "1024,all_reduce,float32,all_reduce/one_shot,1,1,1,5.0,0.2\n")
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    assert aplot.main([str(saved), "-o", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("autotuned.plot: needs matplotlib") and "autotuned[plot]" in err
    assert not (tmp_path / "x.png").exists()
