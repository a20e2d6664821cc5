"""The SQL sandbox's escape corpus, through POST /v1/sql on the real server: every attempt is
refused or cut off with a 422 whose type says why, and afterwards the warehouse's files are
byte for byte what they were (and nothing new appeared inside or outside it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.api.conftest import Server, file_hashes
from tests.api.test_service import problem

TABLE_FUNCTIONS = ("read_csv", "read_csv_auto", "read_parquet", "parquet_scan", "read_json",
                   "read_json_auto", "read_ndjson", "read_json_objects",
                   "read_ndjson_objects", "read_text", "read_blob", "glob", "sniff_csv",
                   "parquet_metadata", "parquet_schema", "parquet_file_metadata",
                   "parquet_kv_metadata")

# (SQL, why): why is the problem type's slug, or a tuple of slugs for a heavy query that a
# loaded machine may cut at the time limit before it reaches the other limit.
# {root}: the warehouse; {out}: a directory outside it; {steps}: a table's dir.
CORPUS: list[tuple[str, str | tuple[str, ...]]] = [
    *[(f"SELECT * FROM {fn}('/etc/passwd')", "refused") for fn in TABLE_FUNCTIONS],
    ("SELECT * FROM read_csv(['/etc/passwd', '/etc/hosts'])", "refused"),
    ("SELECT * FROM read_text('{steps}/../../../../../../etc/passwd')", "refused"),
    ("SELECT * FROM read_text('{root}/_service_keys.json')", "refused"),
    ("SELECT * FROM read_csv('/proc/self/environ')", "refused"),
    ("SELECT * FROM read_csv('https://example.com/x.csv')", "refused"),
    ("SELECT * FROM '/etc/passwd'", "invalid"),  # no replacement scan for that name
    ("SELECT * FROM query('COPY steps TO ''{out}/q.csv''')", "invalid"),
    ("SELECT * FROM read_xlsx('/etc/passwd')", "invalid"),  # no extension auto-loading
    ("COPY steps TO '{out}/steps.csv'", "refused"),
    ("COPY steps TO '{steps}/copied.parquet' (FORMAT parquet)", "refused"),
    ("COPY (SELECT * FROM runs) TO '{root}/runs.csv'", "refused"),
    ("COPY steps FROM '/etc/passwd'", "refused"),
    ("EXPORT DATABASE '{out}/export'", "refused"),
    ("IMPORT DATABASE '{out}/export'", "refused"),
    ("ATTACH '{out}/x.duckdb' AS x", "refused"),
    ("ATTACH ':memory:' AS m", "refused"),
    ("DETACH memory", "refused"),
    ("INSTALL httpfs", "refused"),
    ("FORCE INSTALL httpfs", "refused"),
    ("LOAD httpfs", "refused"),
    ("SET enable_external_access = true", "refused"),
    ("SET lock_configuration = false", "refused"),
    ("SET threads = 64", "refused"),
    ("RESET memory_limit", "refused"),
    ("PRAGMA version", "refused"),
    ("PRAGMA enable_profiling", "refused"),
    ("CALL pragma_version()", "refused"),
    ("CALL checkpoint()", "refused"),
    ("CHECKPOINT", "refused"),
    ("VACUUM", "refused"),
    ("BEGIN TRANSACTION", "refused"),
    ("USE memory", "refused"),
    ("SELECT 1; SELECT 2", "refused"),
    ("SELECT 1; COPY steps TO '{out}/two.csv'", "refused"),
    ("SELECT 1 /* ; */; DROP VIEW steps", "refused"),
    ("/* SELECT */ COPY steps TO '{out}/comment.csv'", "refused"),
    ("-- SELECT 1\nCOPY steps TO '{out}/line.csv'", "refused"),
    ("SELECT 1; -- \nCOPY steps TO '{out}/after.csv'", "refused"),
    ("CREATE TABLE t AS SELECT * FROM steps", "refused"),
    ("CREATE OR REPLACE VIEW steps AS SELECT 1", "refused"),
    ("CREATE MACRO m(x) AS x", "refused"),
    ("CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')", "refused"),
    ("INSERT INTO steps SELECT * FROM steps", "refused"),
    ("WITH x AS (SELECT 1) INSERT INTO steps SELECT * FROM steps", "refused"),
    ("UPDATE steps SET loss = 0", "refused"),
    ("DELETE FROM steps", "refused"),
    ("DROP VIEW steps", "refused"),
    ("ALTER VIEW steps RENAME TO s2", "refused"),
    ("EXPLAIN ANALYZE SELECT * FROM steps", "refused"),
    ("SELECT count(*) FROM range(1000000000000)", "time-limit"),
    ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
     "SELECT count(*) FROM r", "time-limit"),
    ("SELECT sum(a.range * b.range) FROM range(100000000) a, range(100000000) b",
     "time-limit"),
    ("SELECT * FROM range(100000000)", "row-limit"),
    # one row, 100 MB: the byte limit counts
    ("SELECT repeat('x', 100000000) AS big", ("row-limit", "time-limit")),
    ("SELECT list(range) FROM range(100000000)", ("memory-limit", "time-limit")),
    ("SELEKT 1", "invalid"),
    ("SELECT " + "(" * 20000 + "1" + ")" * 20000, "invalid"),  # parser depth, no crash
]


@pytest.mark.parametrize("sql,why", CORPUS, ids=[c[0][:60] for c in CORPUS])
def test_escape_attempt_is_refused(server: Server, tmp_path: Path, sql: str,
                                   why: str | tuple[str, ...]) -> None:
    root = server.root.resolve()
    out = tmp_path / "outside"
    out.mkdir()
    before = file_hashes(root)
    query = sql.format(root=root, out=out, steps=root / "steps")
    r = server.client().post("/v1/sql", json={"sql": query})
    body = problem(r, 422, "body.sql")
    allowed = (why,) if isinstance(why, str) else why
    assert body["type"] in {f"urn:aicf-induct:problem:sql-{w}" for w in allowed}, body
    assert file_hashes(root) == before
    assert list(out.iterdir()) == []


def test_trailing_comment_runs_only_the_one_select(server: Server, tmp_path: Path) -> None:
    before = file_hashes(server.root)
    r = server.client().post("/v1/sql", json={
        "sql": f"SELECT 1 AS one; -- COPY steps TO '{tmp_path}/x.csv'"})
    assert r.status_code == 200 and r.json()["rows"] == [[1]]
    assert file_hashes(server.root) == before and list(tmp_path.iterdir()) == []


def test_limits_say_their_values(server: Server) -> None:
    with server.client() as c:
        slow = c.post("/v1/sql", json={"sql": "SELECT count(*) FROM range(1000000000000)"})
        assert "time limit of 1 s" in slow.json()["detail"]
        # ... and what to do about it
        assert "was stopped: narrow it" in slow.json()["detail"]
        assert "AICF_SERVICE_SQL_TIME_LIMIT_S" in slow.json()["detail"]
        rows = c.post("/v1/sql", json={"sql": "SELECT * FROM range(1001)"})
        assert "more than 1000 rows" in rows.json()["detail"]
        assert c.post("/v1/sql", json={"sql": "SELECT * FROM range(1000)"}).json()[
            "row_count"] == 1000
