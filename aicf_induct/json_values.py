"""Values as JSON can carry them: what the service answers and `--json` prints."""

from __future__ import annotations

import base64
import datetime as dt
import math
from decimal import Decimal
from typing import Any

import numpy as np


def json_safe(v: Any) -> Any:
    """A value JSON can carry: non-finite floats become null (JSON has no NaN: a diverged
    loss is "no value"), NumPy scalars the Python values they hold, times ISO 8601 strings,
    decimals floats, bytes base64, and anything else without a JSON form its string."""
    if isinstance(v, np.generic):  # (a pandas record's int64 was written as its string)
        v = v.item()
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, Decimal):
        return json_safe(float(v))
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, dict):
        return {str(k): json_safe(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [json_safe(x) for x in v]
    return str(v)
