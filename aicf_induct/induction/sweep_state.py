"""The warehouse as a sweep's state: which (problem, candidate, seed) triples have a run that
ended under a protocol, read from a warehouse or through the service's SQL (see `sweep`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aicf_induct.errors import ConfigError
from aicf_induct.induction.sweep_spec import Triple
from aicf_induct.induction.sweep_worker import is_remote

END_STATUSES = ("completed", "early_stopped", "failed", "timeout")
RETRY_STATUSES = ("completed", "early_stopped")  # finished when failures are retried

FINISHED_SQL = """
SELECT json_extract_string(config, '$.sweep.problem_id') AS problem_id,
       json_extract_string(config, '$.sweep.candidate') AS candidate,
       seed, status, count(*) AS runs
FROM runs
WHERE origin = 'sweep'
  AND json_extract_string(config, '$.sweep.protocol') = $protocol
  AND list_contains($statuses, status)
GROUP BY ALL
"""


REMOTE_PAGE = 500  # rows per SQL request to the service (under its row limit)


def finished_runs(root: str | Path, protocol: str, statuses: Sequence[str] = END_STATUSES,
                  api_key: str | None = None) -> dict[Triple, Counter[str]]:
    """Ended runs per triple under `protocol`, by status (`root`: a warehouse, or the
    service's URL read with `api_key`)."""
    import warehouse

    def query(conn: Any) -> list[tuple[Any, ...]]:
        return list(conn.execute(FINISHED_SQL, {"protocol": protocol,
                                                "statuses": list(statuses)}).fetchall())

    rows = _remote_finished(str(root), api_key or "", protocol, statuses) \
        if is_remote(root) else warehouse.with_retry(root, query)
    out: dict[Triple, Counter[str]] = {}
    for p, c, s, status, n in rows:
        out.setdefault((str(p), str(c), int(s)), Counter())[str(status)] += int(n)
    return out


def _remote_finished(url: str, api_key: str, protocol: str,
                     statuses: Sequence[str]) -> list[tuple[Any, ...]]:
    """FINISHED_SQL through the service's SQL sandbox (which binds no parameters: the
    protocol is our own hex digest and the statuses our constants, checked here), a page
    at a time."""
    from aicf_induct.runtime.remote_recorder import RemoteLogError
    from aicf_induct.runtime.remote_sql import remote_sql

    if not protocol.isalnum() or not all(s.isidentifier() for s in statuses):
        raise ConfigError(f"protocol {protocol!r} or statuses {statuses!r} cannot be sent")
    listed = ", ".join(f"'{s}'" for s in statuses)
    sql = FINISHED_SQL.replace("$protocol", f"'{protocol}'").replace("$statuses",
                                                                     f"[{listed}]")
    rows: list[tuple[Any, ...]] = []
    while True:
        try:
            page = remote_sql(url, api_key, f"SELECT * FROM ({sql}) ORDER BY ALL "
                                            f"LIMIT {REMOTE_PAGE} OFFSET {len(rows)}")
        except RemoteLogError as err:
            raise ConfigError(f"cannot read the sweep's finished runs: {err}") from None
        rows += [tuple(r) for r in page]
        if len(page) < REMOTE_PAGE:
            return rows


def finished_triples(root: str | Path, protocol: str, statuses: Sequence[str] = END_STATUSES,
                     api_key: str | None = None) -> Counter[Triple]:
    """Ended runs per triple under `protocol` (more than 1: a duplicate)."""
    return Counter({t: sum(c.values()) for t, c in finished_runs(root, protocol, statuses,
                                                                  api_key).items()})
