"""A JSON body that a route reads itself (the ingest routes, proposals): one object, or a
problem naming `body`; and the route class that has FastAPI read a body as JSON whatever
its Content-Type (`/v1/sql`, `/v1/rewrites`), so every JSON route reads `curl -d` alike."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

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


def _is_json(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


class JsonBodyRoute(APIRoute):
    """A route whose body FastAPI parses, read as JSON whatever its Content-Type says, as
    the routes that read their own bodies do: `curl -d` without `-H` labels JSON
    form-urlencoded, and FastAPI would hand the model the raw bytes (a 422 that says
    nothing of the header). A body that is not JSON is then the usual 400."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def as_json(request: Request) -> Response:
            if not _is_json(request.headers.get("content-type", "application/json")):
                scope = dict(request.scope)
                scope["headers"] = [(k, v) for k, v in request.scope["headers"]
                                    if k.lower() != b"content-type"]
                scope["headers"].append((b"content-type", b"application/json"))
                request = Request(scope, request.receive)
            return await handler(request)

        return as_json
