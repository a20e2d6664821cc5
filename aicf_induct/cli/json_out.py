"""JSON for `--json` output: what strict readers accept (no bare NaN or Infinity)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np


def finite(v: Any) -> Any:
    """`v` with non-finite floats as None (a diverged run's NaN loss is "no value", and
    `json.dumps` would write `NaN`, which JSON does not have) and NumPy scalars as Python's."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [finite(x) for x in v]
    return v


def json_text(obj: Any, indent: int | None = None,
              default: Callable[[Any], Any] | None = None) -> str:
    return json.dumps(finite(obj), indent=indent, default=default, allow_nan=False)
