from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from warehouse import WarehouseError, Writer, connect, visible_parts
from warehouse.catalog import scan_sql
from warehouse.parts import part_columns


def _steps_batch(run: str, start: int, n: int) -> dict[str, object]:
    steps = np.arange(start, start + n)
    return {"run_id": [run] * n, "step": steps, "epoch": steps // 10, "loss": 1.0 / (steps + 1),
            "grad_norm": np.ones(n), "update_ratio": np.zeros(n), "lr": np.full(n, 0.1),
            "step_time_s": np.full(n, 1e-3), "batch_size": np.full(n, 32)}


def test_rows_and_batches_round_trip(root: Path) -> None:
    with Writer(root, flush_interval_s=10) as w:
        w.append("results", {"run_id": "r", "step": 1, "epoch": 0, "split": "val",
                             "metric": "accuracy", "value": 0.5, "final": False})
        w.append_row("results", ("r", 2, 0, "test", "accuracy", 0.75, True, 0))
        w.append_batch("steps", _steps_batch("r", 0, 1000))
    conn = connect(root)
    assert conn.execute("SELECT count(*), sum(step) FROM steps").fetchone() == (1000, 499500)
    got = conn.execute("SELECT split, value, final FROM results ORDER BY step").fetchall()
    assert got == [("val", 0.5, False), ("test", 0.75, True)]
    # partition directory and types as the schema says
    part = visible_parts(root, "steps")[0]
    assert part.parent.name == f"date={datetime.now(UTC):%Y-%m-%d}"
    assert pq.read_schema(part).field("step").type == pa.int64()


def test_background_flush_by_interval_without_close(root: Path) -> None:
    w = Writer(root, flush_interval_s=0.1)
    w.append_batch("steps", _steps_batch("r", 0, 10))
    deadline = time.time() + 5
    while not visible_parts(root, "steps") and time.time() < deadline:
        time.sleep(0.02)
    assert visible_parts(root, "steps"), "interval flush did not happen"
    w.close()
    w.close()  # idempotent


def test_flush_by_size_makes_several_parts(root: Path) -> None:
    with Writer(root, flush_interval_s=60, max_rows=100) as w:
        for i in range(10):
            w.append_batch("steps", _steps_batch("r", i * 100, 100))
            time.sleep(0.05)
    assert len(visible_parts(root, "steps")) >= 2
    assert connect(root).execute("SELECT count(DISTINCT step) FROM steps").fetchone() == (1000,)


def test_column_appearing_later_is_queryable(root: Path) -> None:
    with Writer(root) as w:
        w.append_batch("steps", _steps_batch("old", 0, 5))
    with Writer(root) as w:
        w.append_batch("steps", {**_steps_batch("new", 0, 5), "gpu_mem_mb": [1.5] * 5})
    rows = connect(root).execute(
        "SELECT run_id, count(gpu_mem_mb) FROM steps GROUP BY 1 ORDER BY 1").fetchall()
    assert rows == [("new", 5), ("old", 0)]


def test_parts_of_one_column_signature_are_read_as_one_list(root: Path) -> None:
    """Parts of the same columns are one `read_parquet` (with `union_by_name` over them all,
    DuckDB opened every footer at each bind of a view), the signatures unioned by name."""
    for run, extra in (("a", {}), ("b", {}), ("c", {"gpu_mem_mb": [1.5] * 5})):
        with Writer(root) as w:
            w.append_batch("steps", {**_steps_batch(run, 0, 5), **extra})
    files = visible_parts(root, "steps")
    signatures = [part_columns(f, "steps") for f in files]
    assert sorted(Counter(signatures).values()) == [1, 2]  # a's and b's alike
    assert ("gpu_mem_mb", "double") in max(signatures, key=len)
    assert [name for name, _ in signatures[0]] == pq.read_schema(files[0]).names
    sql = scan_sql("steps", files)
    assert sql.count("read_parquet(") == 2 and "union_by_name" not in sql
    rows = connect(root).execute(
        "SELECT run_id, count(*), count(gpu_mem_mb) FROM steps GROUP BY 1 ORDER BY 1").fetchall()
    assert rows == [("a", 5, 0), ("b", 5, 0), ("c", 5, 5)]


def test_missing_columns_are_null_and_bad_input_fails_in_caller(root: Path) -> None:
    with Writer(root) as w:
        w.append("events", {"run_id": "r", "step": 3, "kind": "checkpoint"})
        with pytest.raises(WarehouseError, match="unknown table"):
            w.append_row("nope", (1,))
        with pytest.raises(WarehouseError, match="columns"):
            w.append_row("steps", ("r", 1))
        with pytest.raises(WarehouseError, match="no column"):
            w.append("steps", {"bogus": 1})
        with pytest.raises(WarehouseError, match="step"):
            w.append_batch("steps", {"step": ["not a number"]})
    got = connect(root).execute("SELECT kind, name FROM events").fetchall()
    assert got == [("checkpoint", None)]
    with pytest.raises(WarehouseError, match="closed"):
        w.append_row("events", ("r",) * 8)


def test_no_temporary_file_left_and_other_engines_read_the_parts(root: Path) -> None:
    with Writer(root, flush_interval_s=0.05) as w:
        for i in range(5):
            w.append_batch("steps", _steps_batch("r", i * 10, 10))
            time.sleep(0.06)
    assert not list(root.rglob("*.partial"))
    # pandas and a plain pyarrow dataset (hive partitioned) read them without this package
    df = pd.read_parquet(root / "steps")
    assert len(df) == 50 and set(df["step"]) == set(range(50))
    t = ds.dataset(root / "steps", format="parquet", partitioning="hive").to_table()
    assert t.num_rows == 50 and "date" in t.column_names


def test_empty_warehouse_has_every_view_with_columns(root: Path) -> None:
    root.mkdir()  # a warehouse nothing was written to yet (a missing one is refused)
    conn = connect(root)
    cols = [r[0] for r in conn.execute("DESCRIBE steps").fetchall()]
    assert cols[:3] == ["run_id", "step", "epoch"]
    assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    assert "status" in [r[0] for r in conn.execute("DESCRIBE runs").fetchall()]


def test_parts_hold_at_most_max_rows(root: Path) -> None:
    with Writer(root, flush_interval_s=60, max_rows=300) as w:
        w.append_batch("steps", _steps_batch("r", 0, 1000))
    sizes = sorted(pq.ParquetFile(p).metadata.num_rows for p in visible_parts(root, "steps"))
    assert sizes == [100, 300, 300, 300]


def test_readme_tables_match_the_schema() -> None:
    from warehouse.schema import markdown

    readme = (Path(__file__).parents[2] / "warehouse" / "README.md").read_text()
    block = readme.split("<!-- tables:begin -->\n", 1)[1].split("<!-- tables:end -->", 1)[0]
    assert block.strip() == markdown().strip(), "regenerate from warehouse.schema.markdown()"


def test_a_badly_typed_row_is_dropped_alone(root: Path, capsys) -> None:
    with Writer(root, flush_interval_s=60) as w:
        w.append_row("results", ("r", 1, 0, "val", "accuracy", "not a float", False, 0))
        w.append_batch("steps", _steps_batch("r", 0, 10))
    assert w.stats.dropped == 1
    assert "dropped 1 row" in capsys.readouterr().err
    assert connect(root).execute("SELECT count(*) FROM steps").fetchone() == (10,)
