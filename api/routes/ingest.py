"""Ingest for remote runtimes (`RemoteRecorder`): create a run, append batches of records
(JSON, or Arrow IPC for bulk steps), end the run. Every route needs a write key; every batch
carries an id and is written once (warehouse/ingest.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import pyarrow as pa
from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel

from aicf_induct.ir.canonical import problems_in
from api.deps import WarehouseDep, WriteAccess
from api.errors import ApiProblem
from api.routes.bodies import json_object
from api.schemas.ingest import BATCH_ID, IngestBatch, IngestResult, KeyCheck, RunCreate, RunEnd
from warehouse import ingest
from warehouse.arrow import read_table
from warehouse.errors import WarehouseError
from warehouse.ingest import BatchReused, IngestError, RunExists
from warehouse.ipc_size import BadStream, decoded_bytes
from warehouse.recorder import check_writable
from warehouse.writer import Writer

router = APIRouter(prefix="/ingest", tags=["ingest"])

ARROW_STREAM = "application/vnd.apache.arrow.stream"
RunId = Annotated[str, Path(min_length=1, max_length=200)]
BatchId = Annotated[str, Query(min_length=1, max_length=128, description=BATCH_ID.description)]


def _body(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI request body of a route that parses its JSON itself."""
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": model.model_json_schema(ref_template="#/components/schemas/{model}")}}}}


def _invalid(err: IngestError) -> ApiProblem:
    return ApiProblem(422, "invalid-input", str(err),
                      field=f"body.{err.field}" if err.field else "body")


async def _json(request: Request) -> dict[str, Any]:
    """The body's JSON object."""
    raw = await request.body()
    return await run_in_threadpool(json_object, raw)  # megabytes: not on the event loop


def _batch_id(body: dict[str, Any]) -> str:
    bid = body.pop("batch_id", None)
    if not isinstance(bid, str):
        raise _invalid(IngestError("batch_id", "missing" if bid is None else "not a string"))
    return bid


async def _commit(wh: Any, batch_id: str, make: Callable[[], Mapping[str, pa.Table]],
                  run_field: str | None = None, path_run: str | None = None,
                  batch_in_query: bool = False) -> IngestResult:
    """Commit the batch `make` builds; `run_field`: how the route's body names the run id a
    409 (a run started before) points at, when not `runs[i].run_id`; `path_run`: the run the
    route's path names (what a 404 for a run never started points at; checked however few
    rows the batch holds). A batch id committed before is a retry when its rows are the
    same (`content_digest`), else a 409."""
    def work() -> IngestResult:
        ingest.batch_key(batch_id)  # a bad id is refused before the records are converted
        tables = make()
        digest = ingest.content_digest(tables)
        ends = tables.get("run_ends")
        # a batch ending runs checks their ends and commits under their locks: two ends of a
        # run sent at once are checked one after the other, the second against the first
        with ingest.ends_locked(wh.root, [] if ends is None else ends["run_id"].to_pylist()):
            if ingest.is_committed(wh.root, batch_id):
                ingest.same_batch(wh.root, batch_id, digest)
                tables = {}
            else:
                _refuse_unstarted(wh, tables, path_run)
                _refuse_contradicting_ends(wh, tables)
            done = ingest.commit(wh.root, batch_id, tables, digest)
        return IngestResult(batch_id=batch_id, written=done.written, rows=done.rows)

    batch_field = "query.batch_id" if batch_in_query else "body.batch_id"
    try:
        return await run_in_threadpool(work)
    except RunNotStarted as err:
        raise ApiProblem(404, "run-not-started", str(err),
                         field="path.run_id" if path_run else "body") from None
    except BatchReused as err:
        raise ApiProblem(409, "batch-reused", str(err), field=batch_field) from None
    except RunExists as err:
        field = run_field or err.field
        raise ApiProblem(409, "run-exists", f"{field}: {err.message}",
                         field=f"body.{field}") from None
    except RunEnded as err:
        raise ApiProblem(409, "run-ended", str(err),
                         field="body.status" if path_run else err.field) from None
    except IngestError as err:
        if batch_in_query and err.field == "batch_id":
            raise ApiProblem(422, "invalid-input", str(err), field=batch_field) from None
        raise _invalid(err) from None


def _refuse_unstarted(wh: Any, tables: Mapping[str, pa.Table], path_run: str | None) -> None:
    """Rows of a run this service never started are refused (they were written as orphans
    no view shows whole); a run without a marker is looked up in the warehouse."""
    for run_id in ingest.unstarted(wh.root, tables, also=path_run):
        found = wh.read(lambda c, r=run_id: c.execute(
            "SELECT count(*) FROM raw_runs WHERE run_id = ?", [r]).fetchone())
        if not found or not found[0]:
            raise RunNotStarted(run_id)


# the ends a run goes on from by no command (`--resume` refuses them; interrupted and failed
# runs resume under their id, and an `abandoned` end is the server's guess)
FINAL_ENDS = ("completed", "early_stopped")


def _refuse_contradicting_ends(wh: Any, tables: Mapping[str, pa.Table]) -> None:
    """An end sent for a run that has ended completed or early stopped is refused unless it
    says the same (status and steps: a retry under another batch id); it would have
    overwritten the run's status. The ends are read from the part files, not the cached
    catalog (under `ingest.ends_locked`: an end committed a moment ago counts), and an end
    earlier in the same batch counts as one stored before the rows after it."""
    ends = tables.get("run_ends")
    if ends is None:
        return
    ids = set(ends["run_id"].to_pylist())
    had: dict[str, tuple[str, int]] = {}
    kept = read_table(wh.root, "run_ends", ["run_id", "status", "steps", "ended_at"],
                      missing_ok=True).to_pylist()
    # each run's first final end, as `ORDER BY ended_at LIMIT 1` (a NULL time last)
    for row in sorted((r for r in kept if r["run_id"] in ids and r["status"] in FINAL_ENDS),
                      key=lambda r: (r["ended_at"] is None, r["ended_at"])):
        had.setdefault(row["run_id"], (row["status"], row["steps"]))
    for i, (run_id, status, steps) in enumerate(zip(
            ends["run_id"].to_pylist(), ends["status"].to_pylist(), ends["steps"].to_pylist(),
            strict=True)):
        if run_id in had and had[run_id] != (status, steps):
            raise RunEnded(run_id, *had[run_id], f"body.run_ends[{i}].status")
        if status in FINAL_ENDS:
            had.setdefault(run_id, (status, steps))


class RunEnded(Exception):
    def __init__(self, run_id: str, status: str, steps: int, field: str) -> None:
        super().__init__(f"run '{run_id}' ended {status} at step {steps} before: an end "
                         "that says otherwise is refused (a retry sends the same end)")
        self.field = field


class RunNotStarted(Exception):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run '{run_id}' was started through this service: start it "
                         "first (POST /v1/ingest/runs, or a batch with its `runs` row)")
        self.run_id = run_id


@router.post("/check")
def check(scope: WriteAccess, wh: WarehouseDep) -> KeyCheck:
    """Whether this key may write, and the server can (a remote runtime asks before it
    trains: a read-only warehouse lost every record of a run that trained to the end)."""
    try:
        check_writable(wh.root)
    except WarehouseError as err:
        raise ApiProblem(503, "warehouse-not-writable", str(err)) from None
    return KeyCheck(scope=scope)


@router.post("/batches", openapi_extra=_body(IngestBatch))
async def batches(_: WriteAccess, wh: WarehouseDep, request: Request) -> IngestResult:
    """Append records of any kinds to the warehouse, all or nothing, once per batch id."""
    body = await _json(request)
    bid = _batch_id(body)
    wid = _writer(request)
    return await _commit(wh, bid, lambda: _batch_tables(body, wid))


def _batch_tables(body: dict[str, Any], writer_id: str) -> Mapping[str, pa.Table]:
    """`tables_of`, each snapshot's IR checked first as `aicf-induct ir validate` checks a file
    (an IR the run page cannot draw, or that a rewrite would fail on, is refused)."""
    snapshots = body.get("snapshots")
    for i, snap in enumerate(snapshots if isinstance(snapshots, list) else []):
        ir = snap.get("ir_json") if isinstance(snap, dict) else None
        found = problems_in(ir) if isinstance(ir, str) else []
        if found:
            raise IngestError(f"snapshots[{i}].ir_json", f"not a valid aicf.ir graph: {found[0]}")
    return ingest.tables_of(body, writer_id)


@router.post("/runs", openapi_extra=_body(RunCreate))
async def create_run(_: WriteAccess, wh: WarehouseDep, request: Request) -> IngestResult:
    """Start a run: its row, and its problem's when given."""
    body = await _json(request)
    bid = _batch_id(body)
    unknown = sorted(set(body) - {"run", "problem"})
    if unknown or "run" not in body:
        raise _invalid(IngestError(unknown[0] if unknown else "run",
                                   "unknown field" if unknown else "missing"))
    batch = {"runs": [body["run"]],
             "problems": [body["problem"]] if body.get("problem") is not None else []}
    wid = _writer(request)
    return await _commit(wh, bid, lambda: _renamed(
        batch, {"runs[0]": "run", "problems[0]": "problem"}, wid), run_field="run.run_id")


@router.post("/runs/{run_id}/end", openapi_extra=_body(RunEnd))
async def end_run(_: WriteAccess, wh: WarehouseDep, run_id: RunId,
                  request: Request) -> IngestResult:
    """End a run: its status, steps taken, wall time and error."""
    body = await _json(request)
    bid = _batch_id(body)
    if body.get("run_id", run_id) != run_id:  # the path names the run; a body may repeat it
        raise _invalid(IngestError("run_id", f"not the run '{run_id}' of the path"))
    status = body.get("status")
    if isinstance(status, str) and status not in ingest.END_STATUSES:
        # `resumed` is a batch's row (a run going on), written under the server's lease; an
        # end written here under none read as `abandoned`
        raise _invalid(IngestError("status", ingest.no_end_status(status, ingest.END_STATUSES)))
    batch = {"run_ends": [{**body, "run_id": run_id}]}
    return await _commit(wh, bid, lambda: _renamed(batch, {"run_ends[0]": ""}, ""),
                         path_run=run_id)


@router.post("/runs/{run_id}/steps", openapi_extra={"requestBody": {
    "required": True, "content": {ARROW_STREAM: {"schema": {"type": "string",
                                                            "format": "binary"}}}}})
async def arrow_steps(_: WriteAccess, wh: WarehouseDep, run_id: RunId, batch_id: BatchId,
                      request: Request) -> IngestResult:
    """Append a run's steps as an Arrow IPC stream (columns of the `steps` table)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != ARROW_STREAM:  # media types are case-insensitive (RFC 9110)
        raise ApiProblem(415, "unsupported-media-type",
                         f"send the steps as {ARROW_STREAM}", field="header.Content-Type")
    raw = await request.body()
    _refuse_inflated(raw, request.app.state.settings.max_ingest_bytes)

    def make() -> Mapping[str, pa.Table]:
        try:
            t = pa.ipc.open_stream(raw).read_all()
        except (pa.ArrowInvalid, OSError) as err:
            raise IngestError("", f"not an Arrow IPC stream ({err})") from None
        return {"steps": ingest.steps_table(t, run_id)} if t.num_rows else {}

    return await _commit(wh, batch_id, make, path_run=run_id, batch_in_query=True)


def _refuse_inflated(raw: bytes, limit: int) -> None:
    """A stream whose batches take more than `limit` bytes once read is a 413 before any is
    decompressed: compression saves the wire, it does not raise what the server holds (a
    zstd body of 11 kB held 320 MB of steps)."""
    try:
        size = decoded_bytes(raw)
    except BadStream as err:
        raise _invalid(IngestError("", f"not an Arrow IPC stream ({err})")) from None
    if size > limit:
        raise ApiProblem(413, "body-too-large",
                         f"the stream's record batches take {size:,} bytes once read, more "
                         f"than the {limit:,} an ingest body may (MAX_INGEST_BYTES): send "
                         "fewer rows a request", field="body")


_LEASE_LOCK = threading.Lock()


def _writer(request: Request) -> str:
    """The writer id of the runs this server ingests: that of a `Writer` the app opens on
    the first ingest and keeps (appending nothing), whose lease says the server is alive, so
    a run being logged through it reads as `running`, not `abandoned`."""
    state = request.app.state
    with _LEASE_LOCK:
        if getattr(state, "ingest_lease", None) is None:
            state.ingest_lease = Writer(state.warehouse.root)
        writer_id: str = state.ingest_lease.writer_id
    return writer_id


def _renamed(batch: dict[str, Any], names: dict[str, str],
             writer_id: str) -> Mapping[str, pa.Table]:
    """`tables_of`, with errors named after the route's own body (`run.seed`, not
    `runs[0].seed`)."""
    try:
        return ingest.tables_of(batch, writer_id)
    except IngestError as err:
        for old, new in names.items():
            if err.field == old or err.field.startswith(old + "."):
                field = (new + err.field[len(old):]).lstrip(".") or "body"
                raise IngestError(field, err.message) from None
        raise
