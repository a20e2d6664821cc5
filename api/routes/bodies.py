"""A JSON body that a route reads itself (the ingest routes, proposals): one object, or a
problem naming `body`."""

from __future__ import annotations

import json
from typing import Any

from api.errors import ApiProblem


def json_object(raw: bytes) -> dict[str, Any]:
    """`raw` parsed: 400 when it is not JSON, 422 when it is not a JSON object."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise ApiProblem(400, "invalid-body", f"the request body is not JSON ({err})",
                         field="body") from None
    if not isinstance(body, dict):
        raise ApiProblem(422, "invalid-input", "the body must be a JSON object", field="body")
    return body
