"""Read-only SQL through the service (`POST /v1/sql`), for a process that logs there and has no
warehouse of its own: a sweep with `--log-to` finds the triples it already ran this way.
Standard library only, like `remote_recorder`.

A query the service may take later (429: its SQL slots are all busy; 503: its warehouse
cannot be read for now; the rest of `RETRY_STATUSES`) is asked again, up to ATTEMPTS times,
each time after what the answer's Retry-After asks or longer (`remote_recorder`'s backoff),
and no more once the waits would pass MAX_WAIT_S in all: then the refusal is the answer. A
server that does not answer is not asked again (it is not busy, it is not there)."""

from __future__ import annotations

import json
import time
import urllib.error
from typing import Any

from aicf_induct.runtime.remote_recorder import (
    RETRY_STATUSES,
    RemoteLogError,
    _problem,
    _reason,
    backoff,
    post_json,
    retry_after_s,
)

ATTEMPTS = 6  # queries sent at most while the service answers a status worth retrying
BACKOFF_S = 0.5  # the first wait between them, doubling (longer when Retry-After asks)
MAX_WAIT_S = 30.0  # waits in all at most: past a query held up to the service's time limit


def remote_sql(url: str, api_key: str, sql: str, timeout_s: float = 60.0, *,
               attempts: int = ATTEMPTS, max_wait_s: float = MAX_WAIT_S) -> list[list[Any]]:
    """The rows of one SELECT run by the service's SQL sandbox; RemoteLogError naming the
    server when it refuses the query (after the retries of a busy one, see the module
    docstring) or cannot be reached."""
    base = url.rstrip("/")
    body = json.dumps({"sql": sql}).encode()
    delays = backoff(BACKOFF_S)
    attempt, waited, t0 = 1, 0.0, time.monotonic()
    while True:
        try:
            rows: list[list[Any]] = post_json(base, api_key, "/v1/sql", body, timeout_s)["rows"]
            return rows
        except urllib.error.HTTPError as err:
            wait = max(retry_after_s(err) or 0.0, next(delays))
            if err.code not in RETRY_STATUSES or attempt >= attempts \
                    or waited + wait > max_wait_s:
                tried = f" (asked {attempt} times in {time.monotonic() - t0:.0f} s)" \
                    if attempt > 1 else ""
                raise RemoteLogError(f"{base} refused the query: {_problem(err)}{tried}") \
                    from None
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise RemoteLogError(f"cannot read from {base}: {_reason(err)}") from None
        time.sleep(wait)
        attempt, waited = attempt + 1, waited + wait
