"""Values as JSON can carry them: what the service answers and `--json` prints."""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from decimal import Decimal
from typing import Any

import numpy as np


def json_safe(v: Any) -> Any:
    """A value JSON can carry: non-finite floats become null (JSON has no NaN: a diverged
    loss is "no value"), NumPy scalars the Python values they hold, times ISO 8601 strings,
    decimals exact numbers (`_decimal`), bytes base64, and anything else without a JSON form
    its string."""
    if isinstance(v, np.generic):  # (a pandas record's int64 was written as its string)
        v = v.item()
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, Decimal):
        return _decimal(v)
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, dict):
        return {str(k): json_safe(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [json_safe(x) for x in v]
    return str(v)


def _decimal(v: Decimal) -> int | float | str | None:
    """A decimal as JSON carries it exactly: one of scale 0 (a HUGEINT, a DECIMAL(38,0)) an
    integer of any size, else the float whose JSON text is the decimal, else the decimal's
    text where every float would round it (past 17 digits: 123456789012345.678)."""
    if not v.is_finite():
        return None
    if int(v.as_tuple().exponent) >= 0:
        return int(v)
    f = float(v)
    return f if Decimal(repr(f)) == v else str(v)


MAX_DEPTH = 64  # JSON nesting the warehouse's readers pass on as values (ingest refuses more)


def json_depth(v: Any) -> int:
    """How deep a parsed JSON value nests (a scalar 0, `[1]` 1, `{"a": [1]}` 2); iterative,
    so that a value too deep for recursion is measured too."""
    deepest, todo = 0, [(v, 0)]
    while todo:
        x, d = todo.pop()
        if isinstance(x, dict | list | tuple):
            deepest = max(deepest, d + 1)
            todo.extend((y, d + 1) for y in (x.values() if isinstance(x, dict) else x))
    return deepest


def repeated_key(pairs: list[tuple[Any, Any]]) -> Any | None:
    """The first key a JSON object's (key, value) pairs name twice, or None: parsers keep
    the last value silently, where the project's readers refuse the repeat (an
    `object_pairs_hook`'s helper: IR documents, space files)."""
    seen: set[Any] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    return None


def stored_json(text: str | None) -> Any:
    """A JSON text the warehouse holds (a run's config, an event's detail) as a value
    (`json_safe`); the text itself when it is not JSON (written by another tool) or nests
    deeper than `MAX_DEPTH` (what a remote client sent before ingest refused it: passed on
    as text, readers and answers never recurse into it)."""
    if text is None:
        return None
    try:
        v = json.loads(text)
    except (ValueError, RecursionError):
        return text
    return text if json_depth(v) > MAX_DEPTH else json_safe(v)


def json_object(v: Any) -> dict[str, Any]:
    """A stored JSON object (its text, or already parsed) as a dict; {} for anything else (no
    JSON, another JSON value, nested too deep to parse): what a reader of rows other writers
    logged (an event's detail, a run's config) leaves out rather than fails on."""
    if isinstance(v, dict):
        return v
    try:
        out = json.loads(v) if v else {}
    except (TypeError, ValueError, RecursionError):
        return {}
    return out if isinstance(out, dict) else {}
