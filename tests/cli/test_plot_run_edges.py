"""`aicf-induct plot run|compare` at the edges a user audit found: an event whose loss is not
finite, a run that diverged, a one-step run, a run named by a prefix of its id, an empty
warehouse, and a legend that covered the curves. Figures are read back from their artists."""

from __future__ import annotations

import contextlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pytest
from matplotlib.collections import PathCollection

import warehouse
from aicf_induct.cli.main import main
from aicf_induct.cli.plot import _run_id
from aicf_induct.plots import run_figure
from warehouse.run_view import RunView, run_view


@dataclass(frozen=True)
class Runs:
    root: Path
    nan: str  # adapt with a NaN injected at step 80: a trigger at step 81 with no finite loss
    diverged: str  # sgd at lr 1e6: the loss is inf, then NaN, from step 3 on
    one_step: str  # one step, one evaluation


def _cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0, argv
    return out.getvalue()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    root = tmp_path_factory.mktemp("edges") / "wh"
    common = ("--warehouse", str(root), "--json", "--quiet")

    def run_id(*argv: str) -> str:
        return str(json.loads(_cli(*argv, *common))["run_id"])

    return Runs(root,
                run_id("adapt", "--dataset", "iris", "--steps", "200", "--inject-nan", "80"),
                run_id("train", "--dataset", "diabetes", "--lr", "1e6", "--optimizer", "sgd",
                       "--epochs", "3"),
                run_id("train", "--dataset", "iris", "--epochs", "1", "--batch-size", "1000"))


def _view(runs: Runs, run_id: str) -> RunView:
    view = warehouse.with_retry(runs.root, lambda c: run_view(c, run_id))
    assert view is not None
    return view


def _plot(runs: Runs, capsys: pytest.CaptureFixture[str], tmp_path: Path, *ids: str) -> str:
    figure = "compare" if len(ids) > 1 else "run"
    assert main(["plot", figure, *ids, "-o", str(tmp_path / "f.png"), "--warehouse",
                 str(runs.root)]) == 0
    return capsys.readouterr().out


def test_an_event_whose_loss_is_not_finite_is_marked_at_the_top_and_counted(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    said = _plot(runs, capsys, tmp_path, runs.nan)
    view = _view(runs, runs.nan)
    nan_trigger = next(e for e in view.events if e["kind"] == "trigger" and e["name"] == "nan")
    assert nan_trigger["loss"] is None  # the case: its step's loss is NaN
    loss_ax = run_figure(view).axes[0]
    marks = {c.get_label(): c.get_offsets() for c in loss_ax.collections
             if isinstance(c, PathCollection)}
    drawn = sum(len(xy) for xy in marks.values())
    counted = int(re.search(r"(\d+) events marked", said).group(1))  # type: ignore[union-attr]
    assert drawn == counted == len(view.marked_events())
    top = loss_ax.get_ylim()[1]
    assert [nan_trigger["step"], top] in marks["trigger"].tolist()


def test_a_diverged_run_keeps_every_step_and_shades_the_non_finite_ones(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    said = _plot(runs, capsys, tmp_path, runs.diverged)
    rows = warehouse.connect(runs.root).execute(
        "SELECT step, isfinite(loss) FROM live_steps WHERE run_id = ? ORDER BY step",
        [runs.diverged]).fetchall()
    bad = [s for s, ok in rows if not ok]
    assert bad and len(bad) < len(rows)  # the case: some steps finite, the later ones not
    assert f"{len(rows)} steps ({len(bad)} with a loss of inf or NaN, shaded)" in said
    fig = run_figure(_view(runs, runs.diverged))
    loss_ax = fig.axes[0]
    lo, hi = loss_ax.get_xlim()
    assert lo <= rows[0][0] and hi >= rows[-1][0]  # the x range holds every logged step
    spans = [(p.get_x(), p.get_x() + p.get_width()) for p in loss_ax.patches]
    assert all(any(a <= s <= b for a, b in spans) for s in bad)
    assert not any(a <= s <= b for a, b in spans for s, ok in rows if ok)


def test_compare_keeps_a_diverged_run_s_steps_and_ticks_the_non_finite_ones(
        runs: Runs) -> None:
    """`plot compare` cut a diverged run at its last finite step, with no mark."""
    from aicf_induct.plots.compare import compare_figure

    rows = warehouse.connect(runs.root).execute(
        "SELECT step, isfinite(loss) FROM live_steps WHERE run_id = ? ORDER BY step",
        [runs.diverged]).fetchall()
    fig = compare_figure([_view(runs, runs.diverged), _view(runs, runs.one_step)])
    loss_ax = fig.axes[0]
    assert loss_ax.get_xlim()[1] >= rows[-1][0]
    ticks = [ln for ln in loss_ax.get_lines() if ln.get_label().endswith("loss inf or NaN")]
    assert len(ticks) == 1
    assert sorted(ticks[0].get_xdata().tolist()) == [s for s, ok in rows if not ok]


def test_a_one_step_run_draws_its_points(runs: Runs, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert ": 1 step, " in _plot(runs, capsys, tmp_path, runs.one_step)
    fig = run_figure(_view(runs, runs.one_step))
    lines = [ln for ax in fig.axes for ln in ax.get_lines()]
    assert len(lines) >= 4  # train loss, val loss, grad norm, update ratio
    # a single point drawn as a line alone is invisible
    assert all(ln.get_marker() not in ("None", None, "") for ln in lines)


def test_the_legends_lie_beside_the_axes_and_the_dynamics_panel_is_labelled(
        runs: Runs) -> None:
    fig = run_figure(_view(runs, runs.nan))
    fig.draw_without_rendering()
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None
        assert legend.get_window_extent().x0 >= ax.get_window_extent().x1
    assert "grad norm" in fig.axes[1].get_ylabel()


def test_a_unique_prefix_of_at_least_6_characters_names_a_run(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    said = _plot(runs, capsys, tmp_path, runs.nan[:12])  # as `runs` prints it
    assert f"(run {runs.nan}: " in said
    said = _plot(runs, capsys, tmp_path, runs.nan[:6], runs.one_step[:8])
    assert f"(2 runs: {runs.nan}, {runs.one_step})" in said


def test_prefixes_match_plainly_and_an_ambiguous_one_counts_its_runs() -> None:
    conn = duckdb.connect()
    conn.execute("CREATE TABLE runs AS SELECT * FROM (VALUES ('abcdef01'), ('abcdef02'), "
                 "('a_c%ef99')) t(run_id)")
    assert _run_id(conn, "abcdef") == ("abcdef01", 2)
    assert _run_id(conn, "abcdef02") == ("abcdef02", 1)
    assert _run_id(conn, "a_c%ef") == ("a_c%ef99", 1)
    assert _run_id(conn, "a%c%ef")[1] == 0 and _run_id(conn, "a_____")[1] == 0  # no wildcards
    assert _run_id(conn, "abcde")[1] == 0  # under 6 characters: only a whole id


@pytest.mark.parametrize("argv, words", [
    (["run", "latest"], "holds no runs"),
    (["compare", "latest", "abcdef"], "holds no runs"),
])
def test_latest_in_an_empty_warehouse_says_it_holds_no_runs(
        argv: list[str], words: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "wh").mkdir()
    out = tmp_path / "x.png"
    assert main(["plot", *argv, "-o", str(out), "--warehouse", str(tmp_path / "wh")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and err.count("\n") == 1, err
    assert "no run 'latest'" not in err and not out.exists()


def test_an_ambiguous_prefix_is_a_one_line_error_naming_how_many_runs_match(
        runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import aicf_induct.cli.plot as plot_cli

    monkeypatch.setattr(plot_cli, "_run_id", lambda conn, given: ("", 3))
    out = tmp_path / "x.png"
    for figure in (["run", "abcdef"], ["compare", "abcdef", "123456"]):
        assert main(["plot", *figure, "-o", str(out), "--warehouse", str(runs.root)]) == 2
        err = capsys.readouterr().err
        assert "'abcdef' starts the ids of 3 runs" in err and err.count("\n") == 1, err
    assert not out.exists()


def test_plot_help_says_a_prefix_names_a_run(capsys: pytest.CaptureFixture[str]) -> None:
    for figure in ("run", "compare"):
        with pytest.raises(SystemExit):
            main(["plot", figure, "--help"])
        assert "6 or more characters" in " ".join(capsys.readouterr().out.split())


def test_non_finite_steps_of_a_curve() -> None:
    from aicf_induct.plots.run import not_finite_steps

    steps = np.array([0, 1, 2, 3])
    assert not_finite_steps(steps, np.array([1.0, np.inf, 2.0, np.nan])).tolist() == [1, 3]


def test_compare_stops_the_loss_axis_where_a_run_diverged(runs: Runs) -> None:
    """The diverged run's finite losses reach 1e197: on a log axis that size, the other
    run's curve was a flat line at the bottom. The axis now stops at 100 × the larger first
    loss, and the steps above it are ticks at the top edge, in the run's colour; the
    dashboard's compare chart stops there too."""
    from aicf_induct.plots.compare import compare_figure
    from api.pages.compare_charts import losses_figure

    views = [_view(runs, runs.diverged), _view(runs, runs.one_step)]
    firsts = [float(v.curves["loss"][1][0]) for v in views]
    top = 100 * max(firsts)
    rows = warehouse.connect(runs.root).execute(
        "SELECT step FROM live_steps WHERE run_id = ? AND isfinite(loss) AND loss > ? "
        "ORDER BY step", [runs.diverged, top]).fetchall()
    assert rows  # the case: finite losses far above the axis
    loss_ax = compare_figure(views).axes[0]
    bottom, drawn_top = loss_ax.get_ylim()
    assert drawn_top == pytest.approx(top)
    one = np.asarray(views[1].curves["loss"][1], dtype=np.float64)
    assert bottom < one.min() and one.max() < drawn_top  # the other run's points on the axis
    ticks = [ln for ln in loss_ax.get_lines() if "loss above" in str(ln.get_label())]
    assert len(ticks) == 1
    assert sorted(ticks[0].get_xdata().tolist()) == [s for (s,) in rows]
    chart = losses_figure(views)
    low, high = chart["layout"]["yaxis"]["range"]
    assert 10 ** high == pytest.approx(top) and 10 ** low < one.min()
    above = [t for t in chart["data"] if "loss above" in t["name"]]
    assert [t["x"] for t in above] == [[s for (s,) in rows]]


def test_compare_autoscales_when_no_run_diverged(runs: Runs) -> None:
    from aicf_induct.plots.compare import compare_figure
    from api.pages.compare_charts import losses_figure

    views = [_view(runs, runs.nan), _view(runs, runs.one_step)]
    assert "range" not in losses_figure(views)["layout"]["yaxis"]
    loss_ax = compare_figure(views).axes[0]
    assert not [ln for ln in loss_ax.get_lines() if "loss above" in str(ln.get_label())]
