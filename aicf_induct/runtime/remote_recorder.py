"""A `Recorder` that logs a run through the service (`aicf-induct serve`) over HTTP.

The training thread only appends the record to an in-memory buffer. A background thread
sends what is buffered in batches of at most `batch_rows` records (`POST
/v1/ingest/batches`) every `flush_interval_s`, or sooner once `batch_rows` records wait,
retrying a failed send with exponential backoff and the same batch id, so the server writes
a retried batch once. A backlog (after an outage) goes as several batches, run starts in the
first and a run's end in the last; a batch whose body is over `MAX_BODY_BYTES` (or that the
server refuses as too large) is halved and sent again (one batch of a long outage's records
was past the server's limit: refused, and lost). A server that stays down does not stop
training: the first failure is said once on stderr, records keep buffering up to
`max_buffered`, records past that are dropped, and `close` says how many were not delivered.
Standard library only (urllib), so a remote runtime needs nothing more.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

from aicf_induct.records import (
    BaseRecorder,
    EventRecord,
    ProblemRecord,
    Record,
    ResultRecord,
    RunEndRecord,
    RunStartRecord,
    SnapshotRecord,
    StepRecord,
    as_dict,
)

# the batch key of each record type (api/schemas/ingest.py)
KEYS: dict[type[Any], str] = {
    ProblemRecord: "problems", RunStartRecord: "runs", SnapshotRecord: "snapshots",
    StepRecord: "steps", EventRecord: "events", ResultRecord: "results",
    RunEndRecord: "run_ends"}
RETRY_STATUSES = {408, 425, 429, 500, 502, 503, 504}  # worth sending again; other 4xx are not
END_KEY = KEYS[RunEndRecord]
START_KEYS = (KEYS[ProblemRecord], KEYS[RunStartRecord])
# a batch's JSON body at most (the service takes 64 MiB: api/settings.py max_ingest_bytes)
MAX_BODY_BYTES = 16 << 20
RESET_SPLIT_BYTES = 1 << 20  # a body at least this large whose send is reset is halved

Batch = dict[str, list[dict[str, Any]]]


class RemoteLogError(Exception):
    """The service refused this client outright (bad URL, unknown key, read-only key)."""


@dataclass
class RemoteStats:
    sent_batches: int = 0
    sent_records: int = 0
    retries: int = 0
    dropped: int = 0  # records given up on (buffer full, or refused by the server)
    errors: list[str] = field(default_factory=list)


def _plain(v: Any) -> Any:
    # JSON has no NaN or infinity: the server reads Python's NaN/Infinity tokens, so floats
    # stay as they are; datetimes become ISO 8601
    return v.isoformat() if isinstance(v, datetime) else v


def record_json(rec: Record) -> dict[str, Any]:
    """`rec` as an ingest body's record (`row_json`)."""
    return row_json(as_dict(rec))


def row_json(row: Mapping[str, Any]) -> dict[str, Any]:
    """A record's fields as an ingest body's record; a trajectory of 0 (no rollback before
    it) left out, as the service reads an absent one, so that a service older than the field
    takes it."""
    return {k: _plain(v) for k, v in row.items() if k != "trajectory" or v}


def batch_body(batch_id: str, batch: Batch) -> bytes:
    """The JSON body of `POST /v1/ingest/batches`."""
    return json.dumps({"batch_id": batch_id, **batch}, default=_default).encode()


def post_json(url: str, api_key: str, path: str, body: bytes,
              timeout_s: float) -> dict[str, Any]:
    """POST a JSON body to the service at `url` with the key; its JSON answer. Raises
    urllib's HTTPError for an error status, OSError or ValueError when no answer came."""
    req = urllib.request.Request(url + path, data=body, method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {api_key}"})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        answer: dict[str, Any] = json.loads(resp.read())
        return answer


class RemoteRecorder(BaseRecorder):
    """Implements `aicf_induct.records.Recorder` over HTTP (see the module docstring)."""

    def __init__(self, url: str, api_key: str, *, flush_interval_s: float = 0.5,
                 batch_rows: int = 5000, max_buffered: int = 1_000_000,
                 timeout_s: float = 10.0, backoff_s: float = 0.1, max_backoff_s: float = 5.0,
                 close_timeout_s: float = 10.0, check: bool = True,
                 stream: TextIO | None = None) -> None:
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.flush_interval_s = flush_interval_s
        self.batch_rows = batch_rows
        self.max_buffered = max_buffered
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.close_timeout_s = close_timeout_s
        self.stream = stream or sys.stderr
        self.stats = RemoteStats()
        self._buffer: dict[str, list[dict[str, Any]]] = {}
        self._n = 0  # records buffered, not yet taken into a batch
        self._inflight = 0  # records of the batch being sent
        self._lock = threading.Lock()
        self._wake = threading.Event()  # send now
        self._stop = threading.Event()  # closing: cut a backoff wait short
        self._idle = threading.Condition(self._lock)
        self._closed = False
        self._warned = False
        self._said: set[str] = set()  # the refusals said: each once (`_give_up`)
        # why the service refuses the key (401, 403: revoked mid-run), once it has: every
        # later batch would be refused for it too, so none is sent
        self._key_refused: str | None = None
        self._down = False  # the last send failed: flush() does not wait for the server
        self._failing = "server unreachable"  # how the last failed send failed, said at close
        self._deadline: float | None = None  # set by close: stop retrying after it
        self.undelivered = 0  # records the service never took, counted by close
        # False: undelivered records are not said (`SpillRecorder` logs them elsewhere and
        # says so itself)
        self.report_losses = True
        if check:
            self.check()
        self._thread = threading.Thread(target=self._run, name="remote-recorder", daemon=True)
        self._thread.start()

    # -- the Recorder interface (training thread: memory only) ------------------------------

    def record(self, rec: Record) -> None:
        row = record_json(rec)
        with self._lock:
            if self._closed:
                return
            if self._n + self._inflight >= self.max_buffered:
                self.stats.dropped += 1
                return
            self._buffer.setdefault(KEYS[type(rec)], []).append(row)
            self._n += 1
            full = self._n >= self.batch_rows
        if full or isinstance(rec, RunEndRecord):
            self._wake.set()  # a finished run should show up promptly

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until everything buffered now has been sent (or `timeout_s` passes). While
        the server is unreachable this only asks for a send: a checkpoint must not wait on a
        server that is down."""
        deadline = time.monotonic() + (self.close_timeout_s if timeout_s is None else timeout_s)
        with self._lock:
            self._wake.set()
            while ((self._n or self._inflight) and self._thread.is_alive()
                   and (not self._down or timeout_s is not None)):
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._idle.wait(min(left, 0.05))
                self._wake.set()

    def close(self) -> None:
        """Send what is buffered (for at most `close_timeout_s`), stop, and say on stderr
        how many records were not delivered, if any."""
        with self._lock:
            if self._closed:
                return
        self.flush(self.close_timeout_s)
        with self._lock:
            self._closed = True
            self._deadline = time.monotonic()
        self._stop.set()
        self._wake.set()
        self._thread.join(self.timeout_s + 1)
        with self._lock:
            lost = self._n + self._inflight + self.stats.dropped
        self.undelivered = lost
        if lost and self.report_losses:
            self._say(f"remote log {self.url}: {lost} record(s) not delivered "
                      f"({self.stats.dropped} dropped, {lost - self.stats.dropped} unsent)")

    # -- talking to the service --------------------------------------------------------------

    def check(self) -> None:
        """Ask the service whether this key may write and it can. A refusal (401, 403, 404;
        503: its warehouse cannot be written) raises `RemoteLogError` before anything
        trains; an unreachable server is only said (the records are buffered until it
        answers)."""
        try:
            self._post("/v1/ingest/check", b"{}")
        except urllib.error.HTTPError as err:
            what = "refused the key" if err.code in (401, 403) else "cannot take the run"
            raise RemoteLogError(f"{self.url} {what}: {_problem(err)}") from None
        except (OSError, ValueError) as err:
            if isinstance(err, ValueError):
                raise RemoteLogError(f"--log-to {self.url}: {err}") from None
            self._warn(f"cannot reach {self.url} ({_reason(err)}); buffering")

    def _post(self, path: str, body: bytes) -> dict[str, Any]:
        return post_json(self.url, self.api_key, path, body, self.timeout_s)

    def _run(self) -> None:
        while True:
            self._wake.wait(self.flush_interval_s)
            self._wake.clear()
            with self._lock:
                batch, n = self._take()
                self._inflight = n
                stop = self._closed
            reachable = self._send(batch, n) if n else True
            with self._lock:
                self._inflight = 0
                left = self._n
                if left and not reachable:  # given up at close: the rest goes with it
                    self._buffer, self._n = {}, 0
                self._idle.notify_all()
            if left and not reachable:
                self._give_up(left, f"{self._failing} at close")
            elif left:
                self._wake.set()  # a backlog: its next batch now
            if stop and not self._n:
                return

    def _take(self) -> tuple[Batch, int]:
        """Up to `batch_rows` of the buffered records, oldest first within each kind, taken out
        of the buffer (under the lock). A run's end goes only in a batch that leaves nothing
        else behind: a client that dies mid-backlog must not leave a run ended with steps
        missing."""
        batch: Batch = {}
        room = self.batch_rows
        for kind in sorted(self._buffer, key=_batch_order):
            rows = self._buffer[kind]
            if room <= 0 or (kind == END_KEY and any(
                    v for k, v in self._buffer.items() if k != END_KEY)):
                break
            batch[kind], self._buffer[kind] = rows[:room], rows[room:]
            room -= len(batch[kind])
        self._buffer = {k: v for k, v in self._buffer.items() if v}
        n = sum(len(v) for v in batch.values())
        self._n -= n
        return batch, n

    def _send(self, batch: Batch, n: int) -> bool:
        """POST one batch until it is written, refused, or the recorder gives up at close;
        False only for the last (the server unreachable: the rest of the buffer is not worth
        trying). A body too large for one request goes as two halves."""
        if self._key_refused is not None:
            self._give_up(n, self._key_refused)
            return True
        body = batch_body(uuid.uuid4().hex, batch)
        if len(body) > MAX_BODY_BYTES and n > 1:
            return self._send_halves(batch)
        delays = backoff(self.backoff_s, self.max_backoff_s)
        while True:
            try:
                self._post("/v1/ingest/batches", body)
                self._down = False
                self.stats.sent_batches += 1
                self.stats.sent_records += n
                return True
            except urllib.error.HTTPError as err:
                if too_large(err, body, n):
                    return self._send_halves(batch)
                if err.code not in RETRY_STATUSES:  # sending it again cannot help
                    why = f"batch refused: {_problem(err)}"
                    if err.code in (401, 403):  # the key: no later batch will be taken
                        why += "; the rest of the run is not sent"
                        self._key_refused = why
                    self._give_up(n, why)
                    return True  # (the server answers: the next batch may be taken)
                self._warn(f"{self.url} answered {err.code}; retrying")
                self._failing = f"server answering {err.code}"  # it may have taken the batch
            except (OSError, ValueError) as err:  # refused, reset, timed out, bad answer
                if too_large(err, body, n):
                    return self._send_halves(batch)
                self._warn(f"cannot reach {self.url} ({_reason(err)}); buffering and retrying")
                self._failing = "server unreachable"
            self._down = True
            self.stats.retries += 1
            if self._deadline is not None and time.monotonic() >= self._deadline:
                self._give_up(n, f"{self._failing} at close")
                return False
            self._stop.wait(next(delays))

    def _send_halves(self, batch: Batch) -> bool:
        return all([self._send(*half) for half in _halves(batch)])  # (a list: both are sent)

    def _give_up(self, n: int, why: str) -> None:
        """Drop `n` records for `why`, said the first time only: a refusal that repeats (a
        key revoked mid-run, a row the server cannot take at every step) must not write a
        line every half second; `close` counts every record not delivered."""
        with self._lock:
            self.stats.dropped += n
        self.stats.errors.append(why)
        if self.report_losses and why not in self._said:
            self._said.add(why)
            self._say(f"remote log: dropped {n} record(s): {why}")

    def _warn(self, text: str) -> None:
        if not self._warned:  # once: a server that stays down must not flood the log
            self._warned = True
            self._say(f"remote log: {text}")

    def _say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


def backoff(first_s: float, most_s: float = float("inf")) -> Iterator[float]:
    """The waits before each next send of a request the server may take later (its status in
    RETRY_STATUSES, or no answer): `first_s`, doubling, at most `most_s`."""
    delay = first_s
    while True:
        yield delay
        delay = min(delay * 2, most_s)


def retry_after_s(err: urllib.error.HTTPError) -> float | None:
    """The seconds a refusal's Retry-After asks the client to wait (429, 503), or None: no
    such header, or an HTTP date (which this service never sends)."""
    try:
        wait = float(err.headers.get("Retry-After", ""))
    except (AttributeError, ValueError):
        return None
    return wait if wait >= 0 else None


def _batch_order(kind: str) -> int:
    """Where a kind's records go when a backlog is cut into batches: problems and run starts
    first (the service refuses rows of a run it has not started), run ends last."""
    return 0 if kind in START_KEYS else 2 if kind == END_KEY else 1


def _halves(batch: Batch) -> list[tuple[Batch, int]]:
    """A batch as two, each kind's records split in order; a run's end in the second."""
    rows = [(k, r) for k in sorted(batch, key=_batch_order) for r in batch[k]]
    out = []
    for part in (rows[:len(rows) // 2], rows[len(rows) // 2:]):
        half: Batch = {}
        for k, r in part:
            half.setdefault(k, []).append(r)
        out.append((half, len(part)))
    return out


def too_large(err: BaseException, body: bytes, n: int) -> bool:
    """Whether a batch of `n` records whose POST of `body` failed with `err` goes again as
    two halves: the server's 413 (its limit is lower than ours), or the connection reset
    while a large body was sent (a server answers a body over its limit with 413 and closes
    at once: the client sees the reset). A single record is never halved."""
    if n <= 1:
        return False
    if isinstance(err, urllib.error.HTTPError):
        return err.code == 413
    return _reset(err) and len(body) > RESET_SPLIT_BYTES


def _reset(err: BaseException) -> bool:
    """Whether the connection was reset or closed while the request was sent."""
    cause = getattr(err, "reason", None) or err
    return isinstance(cause, ConnectionResetError | BrokenPipeError)


def _reason(err: BaseException) -> str:
    return str(getattr(err, "reason", None) or err)


def _problem(err: urllib.error.HTTPError) -> str:
    try:
        detail = json.loads(err.read()).get("detail")
    except (OSError, ValueError, AttributeError):
        detail = None
    return f"{err.code} {detail or err.reason}"


def _default(v: Any) -> Any:
    # NumPy scalars (a metric computed by NumPy) as the Python numbers they hold
    if hasattr(v, "item"):
        return v.item()
    raise TypeError(f"{type(v).__name__} is not JSON serializable")
