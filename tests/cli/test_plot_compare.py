"""`aicf-induct plot compare`: the file is written, the figure holds each run's numbers as the
warehouse's views hold them (read back from its lines, as test_plot_cli.py reads `plot run`'s),
and bad run lists are one-line errors that write nothing."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import warehouse
from aicf_induct.cli.main import main
from aicf_induct.plots.compare import compare_figure
from warehouse.run_view import run_view


def _plot(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["plot", "compare", *argv]) == 0
    return capsys.readouterr().out


def _ids(conn: duckdb.DuckDBPyConnection, problem: str, n: int) -> list[str]:
    rows = conn.execute("SELECT run_id FROM runs WHERE problem_name = ? AND origin = 'sweep' "
                        "ORDER BY run_id LIMIT ?", [problem, n]).fetchall()
    return [r for r, in rows]


def _series(conn: duckdb.DuckDBPyConnection, sql: str, run_id: str) -> tuple[list, list]:
    rows = conn.execute(sql, [run_id]).fetchall()
    return [int(s) for s, _ in rows], [v for _, v in rows]


def _evals(conn: duckdb.DuckDBPyConnection, run_id: str, metric: str) -> tuple[list, list]:
    return _series(conn, "SELECT step, value FROM live_results WHERE run_id = ? AND NOT final "
                         f"AND split = 'val' AND metric = '{metric}' ORDER BY step", run_id)


def _newest(root: Path) -> str:
    return str(warehouse.connect(root).execute(
        "SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()[0])


def test_plot_compare_overlays_each_run_s_losses_and_score(
        dashboard_warehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The adaptive run (rolled back: its path, not the dropped branch) and two sweep runs of
    iris: each run's training loss per step (`live_steps`) and validation loss per
    evaluation (`live_results`, dashed) in one colour, log scale; the validation accuracy
    they share below, in the same colours."""
    wh = dashboard_warehouse
    conn = warehouse.connect(wh.root)
    ids = [wh.adapt["run_id"], *_ids(conn, "iris", 2)]
    out = tmp_path / "cmp.png"
    said = _plot(capsys, *ids, "-o", str(out), "--warehouse", str(wh.root))
    assert said == f"wrote {out} (3 runs: {', '.join(ids)})\n"
    assert out.read_bytes().startswith(b"\x89PNG") and out.stat().st_size > 10_000

    views = [run_view(conn, r) for r in ids]
    fig = compare_figure([v for v in views if v is not None])
    loss_ax, score_ax = fig.axes[:2]
    assert loss_ax.get_yscale() == "log" and score_ax.get_xlabel() == "step"
    lines = {ln.get_label(): ln for ln in loss_ax.get_lines()}
    scores = {ln.get_label(): ln for ln in score_ax.get_lines()}
    assert len(lines) == 2 * len(ids) and len(scores) == len(ids)
    colours = []
    for run_id in ids:
        train, val = lines[f"{run_id[:12]} train loss"], lines[f"{run_id[:12]} val loss"]
        steps, loss = _series(conn, "SELECT step, loss FROM live_steps WHERE run_id = ? "
                                    "ORDER BY step", run_id)
        assert train.get_xdata().tolist() == steps  # under the downsampling threshold
        assert train.get_ydata().tolist() == pytest.approx(loss)
        x, y = _evals(conn, run_id, "loss")
        assert list(val.get_xdata()) == x and val.get_ydata() == pytest.approx(y) and len(x) > 1
        assert val.get_linestyle() == "--" and train.get_linestyle() == "-"
        score = scores[f"{run_id[:12]} val accuracy"]
        x, y = _evals(conn, run_id, "accuracy")
        assert list(score.get_xdata()) == x and score.get_ydata() == pytest.approx(y) and len(x) > 1
        assert train.get_color() == val.get_color() == score.get_color()
        colours.append(train.get_color())
    assert len(set(colours)) == len(ids)
    assert len(lines[f"{ids[0][:12]} train loss"].get_xdata()) == 320  # the path alone


def test_plot_compare_of_different_problems_draws_the_losses_alone(
        dashboard_warehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """iris (accuracy) beside diabetes (r2): no shared score, one axis; the title says the
    losses are not comparable and why no score is drawn."""
    root = dashboard_warehouse.root
    conn = warehouse.connect(root)
    ids = [*_ids(conn, "iris", 1), *_ids(conn, "diabetes", 1)]
    out = tmp_path / "cmp.svg"
    _plot(capsys, *ids, "-o", str(out), "--warehouse", str(root))
    assert out.read_text().lstrip().startswith("<?xml")
    fig = compare_figure([v for v in (run_view(conn, r) for r in ids) if v is not None])
    (ax,) = fig.axes
    assert sorted(ln.get_label() for ln in ax.get_lines()) == sorted(
        f"{r[:12]} {what} loss" for r in ids for what in ("train", "val"))
    title = " ".join(ax.get_title(loc="left").split())
    assert title == ("2 runs of diabetes, iris (different problems: their losses are not "
                     "comparable); no validation score: the runs share none")


def test_plot_compare_takes_latest(dashboard_warehouse, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    root = dashboard_warehouse.root
    adapt = dashboard_warehouse.adapt["run_id"]
    out = _plot(capsys, "latest", adapt, "-o", str(tmp_path / "l.png"), "--warehouse",
                str(root))
    assert f"(2 runs: {_newest(root)}, {adapt})" in out


@pytest.mark.parametrize("runs, words", [
    (["ADAPT"], "RUN: compare 2 to 8 runs (1 given)"),
    ([f"r{i}" for i in range(9)], "RUN: compare 2 to 8 runs (9 given)"),
    (["ADAPT", "x", "ADAPT", "x"], "RUN: 'ADAPT', 'x' given more than once"),
    (["ADAPT", "nope", "nor-this"], "RUN: no run 'nope', 'nor-this' in "),
    (["NEWEST", "latest"], "RUN: 'NEWEST' and 'latest' are the same run"),
    (["ADAPT", "NEWEST", "-o", "x.jpg"], "-o x.jpg: the file must end in"),
])
def test_plot_compare_errors_are_one_line_and_write_nothing(
        dashboard_warehouse, runs: list[str], words: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    root = dashboard_warehouse.root
    named = {"ADAPT": dashboard_warehouse.adapt["run_id"], "NEWEST": _newest(root)}
    argv = [named.get(r, r) for r in runs]
    output = [] if "-o" in argv else ["-o", "x.png"]
    assert main(["plot", "compare", *argv, *output, "--warehouse", str(root)]) == 2
    err = capsys.readouterr().err
    for k, v in named.items():
        words = words.replace(k, v)
    assert err.startswith(f"error: {words}") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []
