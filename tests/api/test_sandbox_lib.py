"""The sandbox as a library (no HTTP): limits that bite while Arrow streams batches, and
values made JSON-safe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aicf_induct.json_values import json_safe
from tests.api.conftest import file_hashes
from warehouse.sandbox import Limits, SandboxError, run_sql


@pytest.fixture(scope="module")
def root(warehouse_root: tuple[Path, dict]) -> Path:
    return warehouse_root[0]


def test_time_limit_cuts_a_query_while_its_rows_stream(root: Path) -> None:
    # a cheap scan, but 10^9 rows in small batches: the interrupt lands during the fetch
    limits = Limits(time_limit_s=0.3, max_rows=10**10, max_bytes=2**62)
    with pytest.raises(SandboxError) as exc:
        run_sql(root, "SELECT range FROM range(1000000000)", limits)
    assert exc.value.reason == "time_limit"


def test_a_query_that_ends_past_its_time_limit_is_refused_not_answered(root: Path) -> None:
    """One expression, which the interrupt does not stop, ran to its end past the limit and
    its rows came back as if within it (the service now also kills such a query:
    warehouse/sandbox_pool.py)."""
    with pytest.raises(SandboxError) as exc:
        run_sql(root, "SELECT len(list_sort(list_reverse(range(3000000))))",
                Limits(time_limit_s=0.01))
    assert exc.value.reason == "time_limit"


def test_row_limit_is_exact(root: Path) -> None:
    assert len(run_sql(root, "SELECT * FROM range(7)", Limits(max_rows=7)).rows) == 7
    with pytest.raises(SandboxError) as exc:
        run_sql(root, "SELECT * FROM range(8)", Limits(max_rows=7))
    assert exc.value.reason == "row_limit"


def test_values_come_back_json_safe(root: Path) -> None:
    before = file_hashes(root)
    r = run_sql(root, "SELECT TIMESTAMPTZ '2024-01-02 03:04:05+00' AS t, DATE '2024-01-02' AS d, "
                      "1.5::DECIMAL(4,2) AS dec, 'ab'::BLOB AS b, [1, NULL] AS l, "
                      "{'a': 'nan'::DOUBLE} AS s, MAP {'k': 1} AS m, INTERVAL 2 DAY AS i, "
                      "170141183460469231731687303715884105727::HUGEINT AS h")
    row = r.rows[0]
    json.dumps(r.rows, allow_nan=False)  # what the service sends
    assert row[:7] == ["2024-01-02T03:04:05+00:00", "2024-01-02", 1.5, "YWI=", [1, None],
                       {"a": None}, {"k": 1}]
    assert [c[0] for c in r.columns] == ["t", "d", "dec", "b", "l", "s", "m", "i", "h"]
    assert file_hashes(root) == before


def test_columns_of_one_name_keep_their_own_values(root: Path) -> None:
    r = run_sql(root, "SELECT 1 AS a, 2 AS a, 3 AS b")
    assert [c[0] for c in r.columns] == ["a", "a", "b"] and r.rows == [[1, 2, 3]]
    r = run_sql(root, "SELECT * FROM (SELECT 1 AS x, 'p' AS y) JOIN (SELECT 1 AS x, 'q' AS z) "
                      "USING (x), (SELECT 9 AS y)")
    assert len(r.rows[0]) == len(r.columns)


def test_values_python_cannot_hold_come_back_as_text(root: Path) -> None:
    """DuckDB's infinite and far-off times, a map keyed by lists, a struct holding an
    infinite date: each a value JSON can carry, the query's other columns as usual."""
    r = run_sql(root, "SELECT 'infinity'::TIMESTAMP AS t, '10000-01-01'::TIMESTAMPTZ AS far, "
                      "MAP {[1]: 2} AS m, {'a': 'infinity'::DATE} AS s, 7 AS n")
    row = r.rows[0]
    json.dumps(r.rows, allow_nan=False)
    assert row[0] == "infinity" and row[1] == "10000-01-01T00:00:00+00:00"
    assert row[2] == [[[1], 2]] and row[3] == {"a": "infinity"} and row[4] == 7


def test_json_safe_floats() -> None:
    assert json_safe([float("inf"), -float("inf"), float("nan"), 1.0]) == [None, None, None, 1.0]
    # NumPy scalars (a pandas record's) as the values they hold: an int64 was its string
    import numpy as np

    assert json_safe([np.int64(3), np.float64("nan"), np.bool_(True)]) == [3, None, True]
