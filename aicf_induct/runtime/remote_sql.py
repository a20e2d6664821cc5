"""Read-only SQL through the service (`POST /v1/sql`), for a process that logs there and has no
warehouse of its own: a sweep with `--log-to` finds the triples it already ran this way.
Standard library only, like `remote_recorder`."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from aicf_induct.runtime.remote_recorder import RemoteLogError, _problem, _reason


def remote_sql(url: str, api_key: str, sql: str, timeout_s: float = 60.0) -> list[list[Any]]:
    """The rows of one SELECT run by the service's SQL sandbox; RemoteLogError naming the
    server when it refuses the query or cannot be reached."""
    base = url.rstrip("/")
    req = urllib.request.Request(base + "/v1/sql", data=json.dumps({"sql": sql}).encode(),
                                 method="POST", headers={
                                     "Content-Type": "application/json",
                                     "Authorization": f"Bearer {api_key}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            rows: list[list[Any]] = json.loads(resp.read())["rows"]
            return rows
    except urllib.error.HTTPError as err:
        raise RemoteLogError(f"{base} refused the query: {_problem(err)}") from None
    except (OSError, ValueError, KeyError) as err:
        raise RemoteLogError(f"cannot read from {base}: {_reason(err)}") from None
