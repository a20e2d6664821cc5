"""JSON for `--json` output: what strict readers accept (no bare NaN or Infinity), by the
rule the service answers with (`aicf_induct.json_values.json_safe`)."""

from __future__ import annotations

import json
from typing import Any

from aicf_induct.json_values import json_safe


def json_text(obj: Any, indent: int | None = None) -> str:
    return json.dumps(json_safe(obj), indent=indent, allow_nan=False)
