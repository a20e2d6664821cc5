"""A JSON body that a route reads itself (the ingest routes, proposals): one object, or a
problem naming `body`."""

from __future__ import annotations

import json
import re
from typing import Any

from api.errors import ApiProblem

# a \uD800-\uDFFF escape: a surrogate, which JSON text can spell alone (no character)
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def json_object(raw: bytes) -> dict[str, Any]:
    """`raw` parsed: 400 when it is not JSON (or nests past Python's recursion limit, or
    holds a lone surrogate, which no file can store), 422 when it is not a JSON object."""
    try:
        body = json.loads(raw)
        if SURROGATE_ESCAPE.search(raw):  # pairs are fine (an emoji); a lone one is not text
            json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ApiProblem(400, "invalid-body", "the request body holds a lone surrogate "
                         "(a \\uD800-\\uDFFF escape not in a pair): not text",
                         field="body") from None
    except ValueError as err:
        raise ApiProblem(400, "invalid-body", f"the request body is not JSON ({err})",
                         field="body") from None
    except RecursionError:
        raise ApiProblem(400, "invalid-body", "the request body nests too deeply",
                         field="body") from None
    if not isinstance(body, dict):
        raise ApiProblem(422, "invalid-input", "the body must be a JSON object", field="body")
    return body
