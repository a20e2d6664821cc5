"""`remote_sql` against a small real HTTP server (http.server in a thread) that answers a
script of statuses: a busy answer (429, 503) is asked again after its Retry-After or the
backoff, a bounded number of times, then refused in one line; other refusals at once. (The
real service's busy SQL slots: tests/cli/test_push.py.)"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from aicf_induct.runtime.remote_recorder import RemoteLogError
from aicf_induct.runtime.remote_sql import remote_sql

BUSY = (429, {"Retry-After": "0"}, {"detail": "too many SQL queries at once"})
OK = (200, {}, {"rows": [[1, "a"]]})


@contextmanager
def scripted(*answers: tuple[int, dict[str, str], dict]) -> Iterator[tuple[str, list[str]]]:
    """A server answering each POST with the next of `answers` (the last one for good); yields
    its URL and the SQL of the requests it got."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # (http.server's name)
            asked.append(json.loads(self.rfile.read(int(self.headers["Content-Length"])))["sql"])
            status, headers, body = answers[min(len(asked), len(answers)) - 1]
            data = json.dumps(body).encode()
            self.send_response(status)
            for k, v in {**headers, "Content-Length": str(len(data))}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_: object) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_a_busy_service_is_asked_again_until_it_answers() -> None:
    """A 429 (Retry-After 0: the backoff's 0.5 s), a 503 without the header (1 s), then the
    rows."""
    with scripted(BUSY, (503, {}, {"detail": "down"}), OK) as (url, asked):
        t0 = time.monotonic()
        assert remote_sql(url, "k", "SELECT 1") == [[1, "a"]]
    assert asked == ["SELECT 1"] * 3 and 1.5 <= time.monotonic() - t0 < 10


def test_a_retry_after_is_waited_out() -> None:
    with scripted((429, {"Retry-After": "1.5"}, {}), OK) as (url, asked):
        t0 = time.monotonic()
        assert remote_sql(url, "k", "SELECT 1") == [[1, "a"]]
    assert len(asked) == 2 and time.monotonic() - t0 >= 1.5  # not the backoff's 0.5 s


@pytest.mark.parametrize("answer, asks, why", [
    (BUSY, 3, "429 too many SQL queries at once (asked 3 times in 2 s)"),  # 0.5 + 1 s
    ((429, {"Retry-After": "3600"}, {"detail": "later"}), 1, "429 later"),  # past the wait
    ((422, {}, {"detail": "no such table"}), 1, "422 no such table"),  # not worth asking again
])
def test_a_refusal_is_one_line_after_bounded_asks(answer: tuple[int, dict[str, str], dict],
                                                   asks: int, why: str) -> None:
    with scripted(answer) as (url, asked), pytest.raises(RemoteLogError) as err:
        remote_sql(url, "k", "SELECT 1", attempts=3, max_wait_s=30)
    assert str(err.value) == f"{url} refused the query: {why}" and len(asked) == asks
