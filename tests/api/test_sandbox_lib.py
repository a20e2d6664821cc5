"""The sandbox as a library (no HTTP): limits that bite while Arrow streams batches, and
values made JSON-safe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.api.conftest import file_hashes
from warehouse.sandbox import Limits, SandboxError, json_safe, run_sql


@pytest.fixture(scope="module")
def root(warehouse_root: tuple[Path, dict]) -> Path:
    return warehouse_root[0]


def test_time_limit_cuts_a_query_while_its_rows_stream(root: Path) -> None:
    # a cheap scan, but 10^9 rows in small batches: the interrupt lands during the fetch
    limits = Limits(time_limit_s=0.3, max_rows=10**10, max_bytes=2**62)
    with pytest.raises(SandboxError) as exc:
        run_sql(root, "SELECT range FROM range(1000000000)", limits)
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


def test_json_safe_floats() -> None:
    assert json_safe([float("inf"), -float("inf"), float("nan"), 1.0]) == [None, None, None, 1.0]
