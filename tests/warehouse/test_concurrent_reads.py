"""Reads that race a compaction, or meet a damaged part, forced into the bad interleaving
deterministically (list, then compact with no grace period, then read), on the real DuckDB:
every reader lists again rather than answer from a stale listing (no rows dropped, no error
blamed on the query), and the SQL sandbox skips a damaged part as every other reader does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest

import warehouse
import warehouse.arrow
import warehouse.layout
import warehouse.sandbox
from api.app import create_app
from api.settings import Settings
from tests.api.conftest import serve_in_thread
from warehouse.arrow import read_table
from warehouse.cached import CachedCatalog
from warehouse.catalog import connect, with_retry
from warehouse.layout import listed_parts, visible_parts
from warehouse.sandbox import Limits, run_sql
from warehouse.writer import Writer

PARTS = 3


def three_parts(root: Path) -> Path:
    """A warehouse whose `steps` are PARTS small parts of one partition (one row each), and
    its `kernel_tuning` the same: what a compaction merges."""
    with Writer(root) as w:
        for i in range(PARTS):
            w.append("steps", {"run_id": "r", "step": i})
            w.append("kernel_tuning", {"op": "linear", "kernel": f"k{i}"})
            w.flush()
    assert len(listed_parts(root, "steps")) == PARTS
    return root


def compacting_after(fn: Callable[..., Any], root: Path) -> Callable[..., Any]:
    """`fn`, whose first call (of `steps` or `kernel_tuning`) is followed by a compaction
    with no grace period: what it returned names parts that are gone, their rows in a
    part it does not name. Later calls (the compaction's own included) are `fn`'s."""
    done: list[bool] = []

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        if not done and args[1] in ("steps", "kernel_tuning"):
            done.append(True)
            report = warehouse.compact(root, grace_s=0)
            assert report.per_table[args[1]] >= PARTS and report.deleted_files >= PARTS
        return out

    return wrapped


def test_read_table_lists_again_when_a_listed_part_is_collected(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    three_parts(root)
    monkeypatch.setattr(warehouse.arrow, "visible_parts",
                        compacting_after(visible_parts, root))
    t = read_table(root, "kernel_tuning", ["kernel"])
    # it read the listing of parts the compaction collected: 0 rows, no error
    assert sorted(t.column("kernel").to_pylist()) == ["k0", "k1", "k2"]


def test_a_listing_whose_part_vanished_before_its_check_is_listed_again(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    three_parts(root)
    monkeypatch.setattr(warehouse.layout, "listed_parts",
                        compacting_after(listed_parts, root))
    parts = visible_parts(root, "steps")
    assert [p.name.split("-")[0] for p in parts] == ["cpart"]  # not [] (3 parts collected)


def test_connect_views_never_miss_rows_of_a_collected_part(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    three_parts(root)
    monkeypatch.setattr(warehouse.layout, "listed_parts",
                        compacting_after(listed_parts, root))
    conn = connect(root)
    try:
        assert conn.execute("SELECT count(*) FROM raw_steps").fetchall() == [(PARTS,)]
    finally:
        conn.close()


def test_the_cached_catalog_never_misses_rows_of_a_collected_part(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    three_parts(root)
    cat = CachedCatalog(root)
    assert cat.read(lambda c: c.execute("SELECT count(*) FROM raw_steps").fetchone()) == \
        (PARTS,)
    with Writer(root) as w:  # one more part: the next read lists the parts again
        w.append("steps", {"run_id": "r", "step": PARTS})
    monkeypatch.setattr(warehouse.layout, "listed_parts",
                        compacting_after(listed_parts, root))
    assert cat.read(lambda c: c.execute("SELECT count(*) FROM raw_steps").fetchone()) == \
        (PARTS + 1,)


def test_sql_sandbox_runs_again_when_a_compaction_collects_a_part_under_it(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """F1: the views were built over the listed parts, then a compaction collected them
    before the query ran: DuckDB's "No files found" was answered as the user's bad SQL."""
    three_parts(root)
    real = warehouse.sandbox.sandbox_connect
    calls: list[int] = []

    def sandbox_connect(r: str | Path, limits: Limits) -> duckdb.DuckDBPyConnection:
        conn = real(r, limits)
        calls.append(1)
        if len(calls) == 1:
            warehouse.compact(root, grace_s=0)
        return conn

    monkeypatch.setattr(warehouse.sandbox, "sandbox_connect", sandbox_connect)
    res = run_sql(root, "SELECT count(*) AS n FROM steps", Limits(time_limit_s=30))
    assert res.rows == [[PARTS]]
    assert len(calls) == 2  # one listing again


def test_sql_sandbox_still_refuses_a_file_the_query_names_that_is_missing(root: Path) -> None:
    """A part-like error about a file the user's SQL names is the user's, at once: not
    listed again and again (25 times, backing off ~4 s in all) until the time limit."""
    three_parts(root)
    with pytest.raises(warehouse.sandbox.SandboxError) as err:
        run_sql(root, f"SELECT * FROM read_parquet('{root.resolve()}/steps/nope.parquet')",
                Limits(time_limit_s=3))
    assert err.value.reason == "invalid" and "nope.parquet" in str(err.value)


def _damage_pages(part: Path, upto: int = 300) -> None:
    """Damage the first pages (bytes 8 to `upto`), keep the footer: the frame and footer
    checks pass."""
    b = bytearray(part.read_bytes())
    for i in range(8, upto):
        b[i] ^= 0xFF
    part.write_bytes(bytes(b))


def damaged_steps(root: Path, rows: int = 1000) -> Path:
    """Two `steps` parts of `rows` rows (runs a and b); the first's pages damaged."""
    with Writer(root) as w:
        for run in "ab":
            w.append_batch("steps", {"run_id": [run] * rows, "step": list(range(rows)),
                                     "loss": [i * 1.37 for i in range(rows)]})
            w.flush()
    part = visible_parts(root, "steps")[0]
    _damage_pages(part)
    return part


def test_sql_sandbox_skips_a_part_with_damaged_pages(root: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """F2: every other reader skips the part (marked unreadable, listed again); the sandbox
    answered every query of the table with a 422 `sql-invalid`."""
    part = damaged_steps(root)
    res = run_sql(root, "SELECT count(*) FROM steps")  # first: nothing marked it yet
    assert res.rows == [[1000]]
    assert part.name in capsys.readouterr().err  # named once, as the views name it
    assert run_sql(root, "SELECT count(*) FROM steps").rows == [[1000]]
    assert with_retry(root, lambda c: c.execute("SELECT count(*) FROM steps").fetchall()) \
        == [(1000,)]


def test_sql_sandbox_skips_a_damaged_part_met_mid_stream(root: Path) -> None:
    """The damaged part is read after the first batches went out: DuckDB's error comes
    through Arrow's stream as an OSError, and is still a part's."""
    n = 200_000
    with Writer(root) as w:
        for run in "ab":
            w.append_batch("steps", {"run_id": [run] * n, "step": list(range(n)),
                                     "loss": [i * 1.37 for i in range(n)]})
            w.flush()
    last = visible_parts(root, "steps")[-1]  # read last, after some batches went out
    lost = pq.read_metadata(last).num_rows
    _damage_pages(last, 3000)
    res = run_sql(root, "SELECT step FROM raw_steps",
                  Limits(time_limit_s=60, max_rows=2 * n, max_bytes=1 << 30))
    assert len(res.rows) == 2 * n - lost


def test_post_sql_answers_over_a_damaged_part(tmp_path: Path) -> None:
    """F2 through the service: POST /v1/sql on the real app (its sandbox's worker process)
    answers from the readable parts, as /v1/health counts them."""
    root = tmp_path / "wh"
    part = damaged_steps(root)
    with serve_in_thread(create_app(Settings(warehouse=root))) as client:
        for _ in range(2):  # and again: not a 422 forever
            r = client.post("/v1/sql", json={"sql": "SELECT count(*) FROM steps"})
            assert r.status_code == 200, r.text
            assert r.json()["rows"] == [[1000]]
        health = client.get("/v1/health").json()
        assert any(part.name in s for s in health["warehouse"]["skipped_parts"]), health
