"""Complete the service's copy of a run from a local warehouse's: `aicf-induct push`.

A run logged through the service by a `SpillRecorder` that the service did not take whole is
written whole to a local warehouse, and the service keeps the part it took. `plan_push` reads
the run locally (DuckDB, through the `warehouse` package) and asks the service what it holds
of it through its read-only SQL route (`remote_sql`, which waits out a busy one), compactly:
steps as contiguous ranges per trajectory, the other kinds as counts per natural key (`KEYS`,
the same SQL on both sides; a result's key holds its value, a snapshot's its IR's hash). The
rows the service lacks are the multiset difference on those keys: a service row unlike the
local one (a result of another value at the same step) stays, and the local one is sent
beside it (a push adds, never replaces). `send` posts exactly them through `POST
/v1/ingest/batches` (`remote_recorder`'s encoding and posting), in batches whose ids are a
hash of the run id and their content, so a batch sent again (a retry, or a push run again
after one that stopped) is a no-op through the service's ingest ledger.

A service with no row of the run is sent its start first (the run's row and its problem's);
the run's end goes last, in the last batch, and only when the service has no end of its own
(an `abandoned` one, `warehouse check --repair`'s guess, does not count: the run's own end
wins over it). Nothing on the service is deleted or changed; each batch is written whole or
not at all.
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.error
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

import warehouse
from aicf_induct.errors import AicfError
from aicf_induct.runtime.remote_recorder import (
    MAX_BODY_BYTES,
    RETRY_STATUSES,
    Batch,
    RemoteLogError,
    _default,
    _halves,
    _problem,
    _reason,
    backoff,
    batch_body,
    post_json,
    row_json,
    too_large,
)
from aicf_induct.runtime.remote_sql import remote_sql
from warehouse.catalog import arrow
from warehouse.ingest import KINDS, RUN_ID
from warehouse.schema import TABLES

# the natural key of a kind's rows, as SQL over its table (the same text runs locally and on
# the service): rows of equal keys are counted, and the service is sent as many of the local
# ones as it lacks. An event's time is the client's, strictly increasing within a process.
# A snapshot's IR goes in as its hash (md5 of the text, the same bytes on both sides), a
# result's value as itself: a float round-trips exactly through JSON and Parquet, but the
# SQL route answers a non-finite one as null, so it is keyed as null and a code (NaN 0,
# infinities their sign) on both sides.
FINITE = "CASE WHEN isfinite(value) THEN value END"
NON_FINITE = "CASE WHEN isnan(value) THEN 0 WHEN isinf(value) THEN sign(value) END"
KEYS: dict[str, tuple[str, tuple[str, ...]]] = {
    "snapshots": ("ir_snapshots", ("step", "reason", "fingerprint", "md5(ir_json)")),
    "events": ("events", ("step", "kind", "name", 'epoch_us("at")')),
    "results": ("results", ("step", "epoch", "split", "metric", "coalesce(trajectory, 0)",
                            "coalesce(final, false)", FINITE, NON_FINITE)),
    "steps": ("steps", ("coalesce(trajectory, 0)", "step")),  # unique: asked as ranges
}
# the kinds in the order they are sent: the run's start first, its end last
ORDER = ("problems", "runs", "snapshots", "steps", "events", "results", "run_ends")
# what the service holds of a run, in one row: its runs rows, its status, its problem's rows
HEAD_SQL = """SELECT (SELECT count(*) FROM raw_runs WHERE run_id = $run),
       (SELECT any_value(status) FROM runs WHERE run_id = $run),
       (SELECT count(*) FROM problems WHERE problem_id = $problem)"""
# a run's steps as islands of consecutive step numbers per trajectory: (t, lo, hi, rows)
STEPS_SQL = """SELECT t, min(step), max(step), count(*) FROM (
    SELECT coalesce(trajectory, 0) AS t, step,
           step - dense_rank() OVER (PARTITION BY coalesce(trajectory, 0) ORDER BY step) AS g
    FROM steps WHERE run_id = $run) GROUP BY t, g"""
NO_END = ("running", "abandoned")  # statuses that are no end of the run's own
PAGE = 500  # rows per SQL answer (the service's SQL_MAX_ROWS: 10,000 unless set lower)
BATCH_ROWS = 10_000  # records per ingest batch (bodies over MAX_BODY_BYTES are halved)
ATTEMPTS = 6  # sends of one batch before the push stops (backoff 0.5 s doubling: ~15 s)
BACKOFF_S = 0.5


class PushError(AicfError):
    """A push that cannot start or went wrong; one line naming the run and what was sent."""


@dataclass
class Plan:
    """What the service lacks of one local run, ready to send."""

    run_id: str
    status: str  # the run's status in the local warehouse
    started: bool  # the service holds no row of the run: its start is sent first
    counts: dict[str, int]  # records to send per kind (ingest's kind names), in ORDER
    records: Iterator[tuple[str, dict[str, Any]]]  # (kind, record) in ORDER
    notes: list[str] = field(default_factory=list)  # what is left as it is, and why

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class Service:
    """The service at `url` with a write key: its SQL route read a page at a time, its ingest
    route posted with retries (`remote_sql` retries a busy SQL route itself)."""

    url: str
    api_key: str
    timeout_s: float = 60.0

    def check(self) -> None:
        """That the service answers and takes this key for writing (`/v1/ingest/check`)."""
        try:
            post_json(self.url, self.api_key, "/v1/ingest/check", b"{}", self.timeout_s)
        except urllib.error.HTTPError as err:
            what = "refused the key" if err.code in (401, 403) else "cannot take runs"
            raise PushError(f"{self.url} {what}: {_problem(err)}") from None
        except (OSError, ValueError) as err:
            raise PushError(f"cannot reach {self.url} ({_reason(err)})") from None

    def rows(self, sql: str) -> list[list[Any]]:
        """Every row of `sql` (ordered), asked PAGE rows at a time."""
        out: list[list[Any]] = []
        while True:
            page = remote_sql(self.url, self.api_key, f"SELECT * FROM ({sql}) ORDER BY ALL "
                                                      f"LIMIT {PAGE} OFFSET {len(out)}",
                              self.timeout_s)
            out += page
            if len(page) < PAGE:
                return out

    def post(self, run_id: str, batch: Batch, n: int, done: Callable[[Batch], None]) -> None:
        """Send one batch until the service has written it (`done` then), halving a body too
        large; PushError when it refuses the batch or stays unreachable."""
        body = batch_body(batch_id(run_id, batch), batch)
        if len(body) > MAX_BODY_BYTES and n > 1:
            self._halves(run_id, batch, done)
            return
        delays, why = backoff(BACKOFF_S), ""
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(next(delays))
            try:
                post_json(self.url, self.api_key, "/v1/ingest/batches", body, self.timeout_s)
                done(batch)
                return
            except urllib.error.HTTPError as err:
                if too_large(err, body, n):
                    self._halves(run_id, batch, done)
                    return
                if err.code not in RETRY_STATUSES:
                    raise PushError(f"the service refused a batch ({_problem(err)})") from None
                why = _problem(err)
            except (OSError, ValueError) as err:
                if too_large(err, body, n):
                    self._halves(run_id, batch, done)
                    return
                why = _reason(err)
        raise PushError(f"{self.url} did not take a batch after {ATTEMPTS} tries ({why})")

    def _halves(self, run_id: str, batch: Batch, done: Callable[[Batch], None]) -> None:
        for half, n in _halves(batch):
            self.post(run_id, half, n, done)


def batch_id(run_id: str, batch: Batch) -> str:
    """A batch's id: a hash of its run and its content, so the same rows sent again are the
    same batch to the service's ledger."""
    content = json.dumps(batch, sort_keys=True, default=_default)
    return "push-" + hashlib.sha256(f"{run_id}\0{content}".encode()).hexdigest()[:48]


def check_runs(root: Path, run_ids: list[str]) -> dict[str, str]:
    """Each named run's status in the local warehouse at `root`, by its whole id (a run may
    be named by the start of its id, as `aicf-induct runs` prints it, cut to 12), in the
    order named, each once; PushError for an id the service cannot take, a run not there
    (or a start of several runs' ids), or one still running."""
    from warehouse.browse import check_named, run_by_prefix

    for run_id in run_ids:
        if not RUN_ID.fullmatch(run_id):
            raise PushError(f"'{run_id}' is no run id (letters, digits, '.', '_' and '-')")

    def read(conn: duckdb.DuckDBPyConnection) -> dict[str, str]:
        named = [run_by_prefix(conn, given) for given in run_ids]
        for given, (_, matches) in zip(run_ids, named, strict=True):
            check_named("RUN_ID", given, matches, f"the warehouse at {root}")
        ids = list(dict.fromkeys(run_id for run_id, _ in named))
        got = dict(conn.execute("SELECT run_id, any_value(status) FROM runs "
                                "WHERE list_contains(?, run_id) GROUP BY run_id",
                                [ids]).fetchall())
        return {run_id: str(got[run_id]) for run_id in ids if run_id in got}

    statuses = warehouse.with_retry(warehouse.existing_warehouse(root), read)
    for run_id in statuses:
        if statuses[run_id] == "running":
            raise PushError(f"run {run_id} is still running in the warehouse at {root} (its "
                            "writer is alive): push it once it has ended")
    return statuses


def plan_push(root: Path, run_id: str, status: str, service: Service) -> Plan:
    """What the service at `service` lacks of the local run `run_id` (`check_runs` first)."""
    return warehouse.with_retry(root, lambda conn: _plan(conn, run_id, status, service))


def send(plan: Plan, service: Service,
         progress: Callable[[int], object] | None = None) -> dict[str, int]:
    """Post the plan's records in batches of BATCH_ROWS (its start in the first, its end in
    the last); the records sent per kind. PushError naming the run and what was sent before
    a batch the service refused."""
    sent: Counter[str] = Counter()

    def done(batch: Batch) -> None:
        sent.update({k: len(v) for k, v in batch.items()})
        if progress is not None:
            progress(sum(len(v) for v in batch.values()))

    batch: Batch = {}
    n = 0
    try:
        for kind, record in plan.records:
            batch.setdefault(kind, []).append(record)
            n += 1
            if n == BATCH_ROWS:
                service.post(plan.run_id, batch, n, done)
                batch, n = {}, 0
        if n:
            service.post(plan.run_id, batch, n, done)
    except PushError as err:
        raise PushError(f"run {plan.run_id}: {err}; sent before it: "
                        f"{describe(dict(sent)) or 'nothing'} (push it again to send the "
                        f"rest)") from None
    return {k: sent[k] for k in ORDER if sent[k]}


def describe(sent: dict[str, int]) -> str:
    """Records per kind in words: `the run's start, 1700 steps, 12 events, its end`."""
    words = []
    for kind in ORDER:
        n = sent.get(kind, 0)
        if not n:
            continue
        if kind == "runs":
            words.append("the run's start")
        elif kind == "run_ends":
            words.append("its end")
        else:
            words.append(f"{n} {kind.removesuffix('s') if n == 1 else kind}")
    return ", ".join(words)


# -- what the service lacks -----------------------------------------------------------------


def _plan(conn: duckdb.DuckDBPyConnection, run_id: str, status: str,
          service: Service) -> Plan:
    run = _local(conn, "SELECT {} FROM raw_runs WHERE run_id = $run LIMIT 1", "runs", run_id)
    problem_id = str(run[0]["problem_id"]) if run else ""
    if not RUN_ID.fullmatch(problem_id):
        raise PushError(f"run {run_id}: its problem id {problem_id!r} cannot be sent")
    try:
        (held_runs, their_status, held_problems), = service.rows(
            _literal(HEAD_SQL, run_id).replace("$problem", f"'{problem_id}'"))
        islands = service.rows(_literal(STEPS_SQL, run_id))
        counts = {kind: service.rows(_literal(_count_sql(kind), run_id))
                  for kind in ("snapshots", "events", "results")}
    except RemoteLogError as err:
        raise PushError(f"cannot read run {run_id} from the service: {err}") from None
    notes: list[str] = []
    lacking: dict[str, list[dict[str, Any]]] = {
        "problems": [] if held_problems else _problems(conn, problem_id),
        "runs": [] if held_runs else run}
    for kind, have in counts.items():
        rows, extra = _lacking(_keyed(conn, kind, run_id),
                               Counter({tuple(r[:-1]): int(r[-1]) for r in have}))
        if kind == "snapshots":
            rows = _with_patterns(conn, rows)
        lacking[kind] = rows
        _note_extra(notes, kind, extra)
    steps, extra = _lacking_steps(conn, run_id, islands)
    _note_extra(notes, "steps", extra)
    lacking["run_ends"] = _end(conn, run_id, status, their_status, notes)
    counts_out = {k: steps.num_rows if k == "steps" else len(lacking.get(k, []))
                  for k in ORDER}
    return Plan(run_id, status, started=not held_runs,
                counts={k: n for k, n in counts_out.items() if n},
                records=_records(lacking, steps), notes=notes)


def _records(lacking: dict[str, list[dict[str, Any]]],
             steps: pa.Table) -> Iterator[tuple[str, dict[str, Any]]]:
    for kind in ORDER:
        if kind == "steps":  # as Arrow until sent: a long run's rows are not all dicts at once
            for start in range(0, steps.num_rows, BATCH_ROWS):
                for row in steps.slice(start, BATCH_ROWS).to_pylist():
                    yield kind, row_json(row)
        else:
            for row in lacking.get(kind, []):
                yield kind, row_json(row)


def _literal(sql: str, run_id: str) -> str:
    # the service's SQL binds no parameters: the run id, checked against ingest's RUN_ID
    # (letters, digits, '.', '_', '-'), goes in as a literal
    assert RUN_ID.fullmatch(run_id), run_id
    return sql.replace("$run", f"'{run_id}'")


def _fields(kind: str) -> list[str]:
    """The columns a kind's record takes from its table (ingest's fields, in its order)."""
    table = KEYS[kind][0] if kind in KEYS else kind
    return [f.name for f in KINDS[kind] if f.name in TABLES[table].column_names]


def _local(conn: duckdb.DuckDBPyConnection, sql: str, kind: str,
           run_id: str) -> list[dict[str, Any]]:
    cols = ", ".join(f'"{c}"' for c in _fields(kind))
    return arrow(conn, sql.format(cols), {"run": run_id}).to_pylist()


def _count_sql(kind: str) -> str:
    table, key = KEYS[kind]
    return f"SELECT {', '.join(key)}, count(*) FROM {table} WHERE run_id = $run GROUP BY ALL"


def _keyed(conn: duckdb.DuckDBPyConnection, kind: str,
           run_id: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The local rows of a kind, each with its key (KEYS), in a fixed order."""
    table, key = KEYS[kind]
    keys = ", ".join(f"{k} AS _k{i}" for i, k in enumerate(key))
    cols = ", ".join(f'"{c}"' for c in _fields(kind))
    rows = arrow(conn, f"SELECT {keys}, {cols} FROM {table} WHERE run_id = $run ORDER BY ALL",
                 {"run": run_id}).to_pylist()
    return [(tuple(r.pop(f"_k{i}") for i in range(len(key))), r) for r in rows]


def _lacking(rows: list[tuple[tuple[Any, ...], dict[str, Any]]],
             have: Counter[tuple[Any, ...]]) -> tuple[list[dict[str, Any]], int]:
    """The rows past the service's count of their key, and how many rows the service holds
    that the local copy does not."""
    left = Counter(have)
    out = []
    for key, row in rows:
        if left[key] > 0:
            left[key] -= 1
        else:
            out.append(row)
    return out, sum(left.values())


def _lacking_steps(conn: duckdb.DuckDBPyConnection, run_id: str,
                   islands: list[list[Any]]) -> tuple[pa.Table, int]:
    """The local steps in none of the service's ranges (`STEPS_SQL`), and how many step rows
    the service holds that the local copy does not."""
    cols = ", ".join(f'"{c}"' for c in _fields("steps"))
    local = arrow(conn, f"SELECT coalesce(trajectory, 0) AS _t, {cols} FROM steps "
                        f"WHERE run_id = $run ORDER BY ALL", {"run": run_id})
    t = local.column("_t").to_numpy()
    step = local.column("step").to_numpy()
    held = np.zeros(len(step), dtype=bool)
    spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for tr, lo, hi, _ in islands:
        spans[int(tr)].append((int(lo), int(hi)))
    for tr, ranges in spans.items():
        lo, hi = np.array(sorted(ranges)).T
        mine = np.flatnonzero(t == tr)
        i = np.searchsorted(lo, step[mine], side="right") - 1
        held[mine] = (i >= 0) & (step[mine] <= hi[np.maximum(i, 0)])
    extra = sum(int(n) for *_, n in islands) - int(held.sum())
    return local.drop_columns(["_t"]).filter(pa.array(~held)), extra


def _problems(conn: duckdb.DuckDBPyConnection, problem_id: str) -> list[dict[str, Any]]:
    """The problem's records: one per split seed its features were computed on (a record
    carries one), the row's fields in each."""
    cols = ", ".join(f'"{c}"' for c in _fields("problems"))
    rows = arrow(conn, f"SELECT {cols} FROM problems WHERE problem_id = $p",
                 {"p": problem_id}).to_pylist()
    if not rows:
        return []
    feats = arrow(conn, "SELECT split_seed, feature, value FROM problem_features "
                        "WHERE problem_id = $p ORDER BY ALL", {"p": problem_id}).to_pylist()
    by_seed: dict[Any, dict[str, float]] = {}
    for f in feats:
        by_seed.setdefault(f["split_seed"], {})[f["feature"]] = f["value"]
    return [{**rows[0], "features": fs, "features_split_seed": seed}
            for seed, fs in (by_seed or {None: {}}).items()]


def _with_patterns(conn: duckdb.DuckDBPyConnection,
                   rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Snapshot records with their structure's patterns (the local `ir_patterns` rows of
    their fingerprints), as ingest takes them."""
    fps = sorted({r["fingerprint"] for r in rows})
    pats: dict[str, dict[str, float]] = defaultdict(dict)
    if fps:
        for p in arrow(conn, "SELECT fingerprint, pattern, value FROM ir_patterns "
                             "WHERE list_contains($fps, fingerprint)", {"fps": fps}).to_pylist():
            pats[p["fingerprint"]][p["pattern"]] = p["value"]
    return [{**r, "patterns": pats[r["fingerprint"]]} for r in rows]


def _end(conn: duckdb.DuckDBPyConnection, run_id: str, status: str, theirs: str | None,
         notes: list[str]) -> list[dict[str, Any]]:
    """The run's end to send: the local one, unless the service has an end of its own or
    the local run has none to give."""
    if theirs is not None and theirs not in NO_END:
        if theirs != status:
            notes.append(f"the service's copy ended {theirs}, the local one {status}: left "
                         "as it is")
        return []
    if status == "abandoned":
        notes.append("its end is not sent: it reads abandoned locally, an end the service "
                     "takes from no client")
        return []
    return _local(conn, "SELECT {} FROM run_ends WHERE run_id = $run", "run_ends", run_id)


def _note_extra(notes: list[str], kind: str, extra: int) -> None:
    if extra > 0:
        notes.append(f"the service holds {extra} {kind} row(s) the local copy does not: "
                     "left as they are")
