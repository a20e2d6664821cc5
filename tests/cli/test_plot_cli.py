"""`aicf-induct plot`: the files are written, and the figures hold what the warehouse holds —
read back from their artists (lines, marker collections, image cells, bars), not pixels."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.collections import PathCollection
from matplotlib.image import AxesImage

import warehouse
from aicf_induct.cli.main import main
from aicf_induct.plots import correlation_figure, leaderboard_figure, run_figure
from warehouse.browse import mined
from warehouse.run_view import run_view


def _plot(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["plot", *argv]) == 0
    return capsys.readouterr().out


def test_plot_run_marks_every_event_at_its_exact_step_and_loss(
        dashboard_warehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wh = dashboard_warehouse
    run_id = wh.adapt["run_id"]
    out = tmp_path / "run.png"
    said = _plot(capsys, "run", run_id, "-o", str(out), "--warehouse", str(wh.root))
    assert out.read_bytes().startswith(b"\x89PNG") and out.stat().st_size > 10_000

    conn = warehouse.connect(wh.root)
    view = run_view(conn, run_id)
    # a rolled-back run: the steps of the path it took, and every row it logged
    live, logged = view.run["live_steps"], view.run["logged_steps"]
    assert live < logged and (logged, live) == conn.execute(
        "SELECT (SELECT count(*) FROM steps WHERE run_id = $r), "
        "(SELECT count(*) FROM live_steps WHERE run_id = $r)", {"r": run_id}).fetchone()
    assert f": {live} steps on the path taken ({logged} logged), " \
           f"{len(view.marked_events())} events marked" in said
    fig = run_figure(view)
    loss_ax = fig.axes[0]
    train = next(ln for ln in loss_ax.get_lines() if ln.get_label() == "train loss (step)")
    live = conn.execute("SELECT step FROM live_steps WHERE run_id = ? ORDER BY step",
                        [run_id]).fetchall()
    # the path taken, under the downsampling threshold: every step once
    assert train.get_xdata().tolist() == [s for s, in live]
    dropped = [ln for ln in loss_ax.get_lines() if ln.get_linestyle() == ":"]
    assert len(dropped) == len(view.dropped) >= 1
    assert sum(len(ln.get_xdata()) for ln in dropped) == view.discarded_steps
    rows = conn.execute("SELECT step, trajectory, loss FROM steps WHERE run_id = ?",
                        [run_id]).fetchall()
    marks = {c.get_label(): c.get_offsets() for c in loss_ax.collections
             if isinstance(c, PathCollection)}
    assert set(marks) == {"trigger", "decision", "rewrite", "rollback"}
    events = conn.execute("SELECT kind, step, (SELECT count(*) FROM events r WHERE r.run_id = "
                          "e.run_id AND r.kind = 'rollback' AND r.at < e.at) FROM events e "
                          "WHERE run_id = ? AND kind IN ('trigger', 'decision', 'rewrite', "
                          "'rollback')", [run_id]).fetchall()
    assert len(marks["rewrite"]) == wh.adapt["rewrites"]
    assert len(marks["rollback"]) == wh.adapt["rollbacks"]
    for kind, xy in marks.items():
        mine = sorted((s, t) for k, s, t in events if k == kind)
        assert sorted(x for x, _ in xy) == [s for s, _ in mine]
        # the loss logged at that step (the last one, past the end) on the path of the event's
        # trajectory (the rollbacks before it): the latest row at or before the step among the
        # trajectories up to its own
        expected = sorted(max((s, tr, x) for s, tr, x in rows if tr <= t and s <= step)[2]
                          for step, t in mine)
        assert sorted(y for _, y in xy) == pytest.approx(expected)
    # each rolled-back span is shaded, from the step rolled back to, to the step it was
    # noticed (the legend names the first)
    shaded = [(p.get_x(), p.get_x() + p.get_width()) for p in loss_ax.patches
              if p.get_alpha() == 0.12]
    assert shaded == view.rollback_windows and len(shaded) == wh.adapt["rollbacks"]
    assert all(lo in marks["rollback"][:, 0] for lo, _ in shaded)
    assert next(p.get_label() for p in loss_ax.patches if p.get_alpha() == 0.12) == \
        "rolled back, replayed"


def test_plot_run_latest_is_the_run_started_last(dashboard_warehouse, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = dashboard_warehouse.root
    out = _plot(capsys, "run", "latest", "-o", str(tmp_path / "l.png"), "--warehouse",
                str(root))
    newest = warehouse.connect(root).execute(
        "SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()[0]
    assert f"(run {newest}: " in out and (tmp_path / "l.png").stat().st_size > 10_000


def test_plot_correlations_colours_each_pair_and_stars_the_significant(
        dashboard_warehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wh = dashboard_warehouse
    out = tmp_path / "corr.svg"
    _plot(capsys, "correlations", "-o", str(out), "--warehouse", str(wh.root))
    assert out.read_text().lstrip().startswith("<?xml") and out.stat().st_size > 10_000
    rows = warehouse.with_retry(wh.root, lambda c: mined(c, "correlations"))
    fig = correlation_figure(rows, fdr=0.5)
    ax = fig.axes[0]
    image = next(a for a in ax.get_children() if isinstance(a, AxesImage))
    z = image.get_array()
    features = [t.get_text() for t in ax.get_yticklabels()]
    traits = [t.get_text() for t in ax.get_xticklabels()]
    assert z.shape == (len(features), len(traits)) and len(rows) == z.count()
    for r in rows:
        assert z[features.index(r["feature"]), traits.index(r["trait"])] == pytest.approx(
            r["correlation"])
    stars = [t for t in ax.texts if t.get_text() == "*"]
    assert len(stars) == sum(r["q_value"] <= 0.5 for r in rows) > 0


def test_plot_leaderboard_bars_are_the_reports_mean_scores(
        dashboard_warehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wh = dashboard_warehouse
    out = tmp_path / "lb.png"
    _plot(capsys, "leaderboard", "iris", "-o", str(out), "--warehouse", str(wh.root))
    assert out.stat().st_size > 5_000
    board = warehouse.run_report(warehouse.connect(wh.root), "leaderboard",
                                 {"problem": "iris", "top": 10})
    fig = leaderboard_figure(board, "iris")
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx(board["mean_score"].tolist()) and len(heights) >= 4
    best = next(c for c in ax.collections if isinstance(c, PathCollection))
    assert [y for _, y in best.get_offsets()] == pytest.approx(board["best_score"].tolist())
    assert ax.get_ylabel() == "test accuracy"  # the split the scores are of
    val = leaderboard_figure(board.assign(score_split=["test"] + ["test, val"] *
                                          (len(board) - 1)), "iris")
    assert val.axes[0].get_ylabel() == "test or val accuracy"


@pytest.mark.parametrize("argv, words", [
    (["run", "nope", "-o", "x.png"], "no run 'nope'"),
    (["run", "nope", "-o", "x.jpg"], "-o"),
    (["leaderboard", "no_such_problem", "-o", "x.png"], "no scored runs of 'no_such_problem'"),
    (["leaderboard", "iris", "--top", "0", "-o", "x.png"], "--top: must be >= 1"),
    (["correlations", "--fdr", "2", "-o", "x.png"], "--fdr"),
    (["correlations", "--pack", "-o", "x.png"], "--pack and --warehouse: draw one of them"),
    (["run", "nope", "-o", "missing/x.png"], "does not exist"),
])
def test_plot_errors_are_one_line_and_write_nothing(
        dashboard_warehouse, argv: list[str], words: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["plot", *argv, "--warehouse", str(dashboard_warehouse.root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("output, words", [
    ("d.png", "error: -o d.png: is a folder, not a file\n"),  # every output's wording
    ("/proc/a.png", "error: -o /proc/a.png: cannot write in the folder /proc ("),
    # said "the folder f.txt does not exist", and "-o .: ..." for an empty name
    ("f.txt/x.png", "error: -o f.txt/x.png: /"),  # the absolute path of f.txt
    ("", "error: -o : empty file name\n"),
    (f"{'n' * 252}.png", f"error: -o {'n' * 252}.png: the file name is longer than 255 bytes"),
])
def test_plot_write_errors_name_the_output_path_not_a_temporary_file(
        dashboard_warehouse, output: str, words: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.png").mkdir()
    (tmp_path / "f.txt").write_text("a file")
    assert main(["plot", "run", "latest", "-o", output,
                 "--warehouse", str(dashboard_warehouse.root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(words) and ".tmp" not in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.png", "f.txt"]


def test_a_plot_to_a_file_under_a_file_says_which_is_no_folder(
        dashboard_warehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f.txt").write_text("a file")
    assert main(["plot", "run", "latest", "-o", str(tmp_path / "f.txt" / "x.png"),
                 "--warehouse", str(dashboard_warehouse.root)]) == 2
    assert capsys.readouterr().err.endswith(f"{tmp_path / 'f.txt'} is a file, not a folder\n")


def test_a_plot_to_a_name_of_255_bytes_is_written(dashboard_warehouse, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Legal, but its temporary sibling's name was longer: "File name too long"."""
    out = tmp_path / f"{'n' * 251}.png"
    assert main(["plot", "run", "latest", "-o", str(out),
                 "--warehouse", str(dashboard_warehouse.root)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


def test_plot_correlations_without_a_fit_says_how_to_mine(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    (tmp_path / "wh").mkdir()
    assert main(["plot", "correlations", "-o", str(tmp_path / "c.png"), "--warehouse",
                 str(tmp_path / "wh")]) == 2
    assert "aicf-induct induce fit" in capsys.readouterr().err
    assert not (tmp_path / "c.png").exists()


def test_plot_correlations_of_the_pack_draws_the_most_significant(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped pack's thousands of correlations: the grid of the features and traits of
    the --top most significant, every correlation of that grid drawn."""
    from aicf_induct.induction.pack import load_pack
    from aicf_induct.plots.reports import most_significant

    rows = [{str(k): v for k, v in r.items()}
            for r in load_pack().correlations.to_dict("records")]
    out = tmp_path / "c.png"
    said = _plot(capsys, "correlations", "--pack", "--top", "5", "-o", str(out))
    shown = most_significant(rows, 5)
    assert f"wrote {out} ({len(shown)} correlations of {len(rows)} from pack " in said
    assert out.read_bytes().startswith(b"\x89PNG")
    best = sorted(rows, key=lambda r: r["q_value"])[:5]
    features, traits = {r["feature"] for r in best}, {r["trait"] for r in best}
    assert {(r["feature"], r["trait"]) for r in shown} == {
        (r["feature"], r["trait"]) for r in rows
        if r["feature"] in features and r["trait"] in traits}
    assert most_significant(rows, 0) == rows
