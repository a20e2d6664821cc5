"""A problem named by concurrent requests (`/v1/rewrites`' `problem`, `/v1/proposals`'
`dataset`) is featurised once: the requests that ask while it is being featurised wait for
that result (or its error, which is not kept); other names do not wait for it. Counted with
a stand-in for the featurise function, through the real server."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

import api.proposing
from aicf_induct.errors import DataError
from api.app import create_app
from api.settings import Settings
from tests.api.conftest import serve_in_thread
from tests.api.test_rewrites import BODY

NAMED = {k: v for k, v in BODY.items() if k not in ("features", "task")}
WAIT_S = 10.0  # a bound on every wait below (the stand-ins do not sleep that long)


class StandIn:
    """`featurise` counting its calls per name, each held until `release` is set (once
    `started` says one is under way); names in `fail` raise DataError instead."""

    def __init__(self, real: Callable[[str], Any], fail: frozenset[str] = frozenset(),
                 also: Callable[[str], None] = lambda name: None) -> None:
        self.real, self.fail, self.also = real, fail, also
        self.calls: Counter[str] = Counter()
        self.started, self.release = threading.Event(), threading.Event()
        self._lock = threading.Lock()

    def __call__(self, name: str) -> Any:
        with self._lock:
            self.calls[name.strip()] += 1
        self.started.set()
        self.also(name)
        assert self.release.wait(WAIT_S)
        if name.strip() in self.fail:
            raise DataError(f"'{name}': the table could not be read")
        return self.real(name)


@pytest.fixture
def client(warehouse_root: tuple[Path, dict], pack_path: Path) -> Iterator[httpx.Client]:
    app = create_app(Settings(warehouse=warehouse_root[0], pack=pack_path,
                              proposal_concurrency=4))
    with serve_in_thread(app) as c:
        yield c


def _rewrites(client: httpx.Client, name: str) -> httpx.Response:
    return client.post("/v1/rewrites", json={**NAMED, "problem": name})


def _together(*calls: Callable[[], httpx.Response], stand_in: StandIn) -> list[httpx.Response]:
    """The calls at once: the first, then the others once it is featurising; the stand-in
    held until they have had time to ask too."""
    with ThreadPoolExecutor(len(calls)) as pool:
        first = pool.submit(calls[0])
        assert stand_in.started.wait(WAIT_S)
        rest = [pool.submit(c) for c in calls[1:]]
        time.sleep(0.5)  # the others reach the featurisation under way (or start their own)
        stand_in.release.set()
        return [f.result(WAIT_S) for f in (first, *rest)]


def test_concurrent_requests_for_one_name_featurise_it_once(
        client: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in = StandIn(api.proposing.featurise)
    monkeypatch.setattr(api.proposing, "featurise", stand_in)
    answers = _together(lambda: _rewrites(client, "wine"), lambda: _rewrites(client, " wine"),
                        lambda: client.post("/v1/proposals", json={"dataset": "wine", "top": 3}),
                        stand_in=stand_in)
    assert [r.status_code for r in answers] == [200, 200, 200], [r.text for r in answers]
    assert answers[0].json() == answers[1].json()
    assert len(answers[2].json()["candidates"]) == 3
    assert stand_in.calls == {"wine": 1}
    assert _rewrites(client, "wine").json() == answers[0].json()  # kept
    assert stand_in.calls == {"wine": 1}


def test_a_failure_reaches_every_waiting_request_and_is_not_kept(
        client: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in = StandIn(api.proposing.featurise, fail=frozenset({"wine"}))
    monkeypatch.setattr(api.proposing, "featurise", stand_in)
    answers = _together(lambda: _rewrites(client, "wine"),
                        lambda: client.post("/v1/proposals", json={"dataset": "wine"}),
                        stand_in=stand_in)
    # each request's refusal names its own field
    assert [(r.status_code, r.json()["field"]) for r in answers] == [
        (422, "body.problem"), (422, "body.dataset")]
    assert all("could not be read" in r.json()["detail"] for r in answers)
    assert stand_in.calls == {"wine": 1}
    stand_in.fail = frozenset()
    again = _rewrites(client, "wine")  # tried again, not the kept failure
    assert again.status_code == 200, again.text
    assert stand_in.calls == {"wine": 2}


def test_different_names_are_featurised_side_by_side(
        client: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each featurisation waits at a barrier of two: one name waiting for the other would
    break it (and the requests) after WAIT_S."""
    barrier = threading.Barrier(2, timeout=WAIT_S)

    def meet(name: str) -> None:
        barrier.wait()

    stand_in = StandIn(api.proposing.featurise, also=meet)
    stand_in.release.set()
    monkeypatch.setattr(api.proposing, "featurise", stand_in)
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda n: _rewrites(client, n), ["wine", "iris"]))
    assert [r.status_code for r in answers] == [200, 200], [r.text for r in answers]
    assert stand_in.calls == {"wine": 1, "iris": 1}


def _until(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, "not within WAIT_S"
        time.sleep(0.01)


@pytest.mark.parametrize("route", ["rewrites", "proposals"])
def test_a_request_waiting_for_a_featurisation_holds_no_slot(
        warehouse_root: tuple[Path, dict], pack_path: Path, monkeypatch: pytest.MonkeyPatch,
        route: str) -> None:
    """Two slots: a request featurises wine (one slot), a second (of either route) names wine
    and waits for it, and a third, for iris, takes the other slot and featurises at once
    (which releases wine's). The waiting request held the other slot: the third got 429."""
    def iris_releases_wine(name: str) -> None:
        if name == "iris":  # iris under way while wine's featuriser holds its slot
            stand_in.release.set()

    stand_in = StandIn(api.proposing.featurise, also=iris_releases_wine)
    monkeypatch.setattr(api.proposing, "featurise", stand_in)
    app = create_app(Settings(warehouse=warehouse_root[0], pack=pack_path,
                              proposal_concurrency=2))
    props = app.state.proposals
    second: dict[str, Callable[[httpx.Client], httpx.Response]] = {
        "rewrites": lambda c: _rewrites(c, "wine"),
        "proposals": lambda c: c.post("/v1/proposals", json={"dataset": "wine", "top": 3})}
    with serve_in_thread(app) as client, ThreadPoolExecutor(3) as pool:
        first = pool.submit(_rewrites, client, "wine")
        assert stand_in.started.wait(WAIT_S)
        waiting = pool.submit(second[route], client)
        _until(lambda: props.describing.waiting("wine") == 1)
        third = pool.submit(_rewrites, client, "iris")
        answers = [f.result(3 * WAIT_S) for f in (first, waiting, third)]
    assert [r.status_code for r in answers] == [200, 200, 200], [r.text for r in answers]
    assert stand_in.calls == {"wine": 1, "iris": 1}
