"""A request body limit counted on the stream: the bytes that arrive are counted, whatever
Content-Length says (a declared length over the limit is refused at once; a small or missing
one is not believed). Over the limit: 413 as problem+json. Routes under a prefix of
`prefix_limits` (the ingest routes) have that limit instead. The `pages` (the proposal form)
answer an oversize body themselves, as a page a browser shows: a declared length is left to
them, and what arrives is still counted."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import ApiProblem, problem_response

SLUG = "body-too-large"


class BodyTooLarge(ApiProblem):
    """Raised from `receive`: an HTTPException, so a route reading its body turns it into the
    problem response through the app's handlers (FastAPI re-raises HTTPExceptions there)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, SLUG, f"the request body is larger than {limit} bytes")


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int,
                 prefix_limits: dict[str, int] | None = None,
                 pages: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.prefix_limits = prefix_limits or {}
        self.pages = pages

    def _limit(self, path: str) -> int:
        return next((n for p, n in self.prefix_limits.items() if path.startswith(p)),
                    self.max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        limit = self._limit(path)
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > limit and path not in self.pages:
            await self._refuse(scope, receive, send, limit)
            return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge:
            if started:
                raise
            await self._refuse(scope, receive, send, limit)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        response = problem_response(413, f"the request body is larger than {limit} "
                                         "bytes", slug=SLUG,
                                    headers={"Connection": "close"})
        await response(scope, receive, send)
