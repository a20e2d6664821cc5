"""Proposals: ranked structures for a problem named, given by its meta-features, or uploaded
(multipart: `file`, `target`), as `aicf-induct propose --json` prints them.

The route reads its body itself: a JSON body up to `max_body_bytes`, an upload up to
`max_upload_bytes`, both counted as they arrive (`api.upload`), the upload spooled to a
temporary directory that is gone when the answer is."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, BinaryIO, TypeVar

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError

from api.deps import ReadAccess, SettingsDep
from api.errors import ApiProblem
from api.proposing import BadRequest, PackMissing, Proposals, ProposalsBusy
from api.routes.bodies import json_object
from api.schemas.proposals import (
    DatasetProposalRequest,
    FeatureNames,
    FeaturesProposalRequest,
    Proposal,
    UploadProposalRequest,
)
from api.upload import (
    FormError,
    boundary_of,
    column_list,
    file_name,
    named_parts,
    read_part,
    save_file,
    spool,
    spooled,
)

router = APIRouter(tags=["proposals"])

T = TypeVar("T")
JSON = "application/json"


async def get_proposals(request: Request) -> Proposals:
    props: Proposals = request.app.state.proposals
    return props


ProposalsDep = Annotated[Proposals, Depends(get_proposals)]


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(ref_template="#/components/schemas/{model}")


BODY = {"requestBody": {"required": True, "content": {
    JSON: {"schema": {"oneOf": [_schema(DatasetProposalRequest),
                                _schema(FeaturesProposalRequest)]}},
    "multipart/form-data": {"schema": _schema(UploadProposalRequest)}}}}


@router.post("/proposals", response_model=Proposal, openapi_extra=BODY)
async def propose(request: Request, _: ReadAccess, props: ProposalsDep,
                  settings: SettingsDep) -> Response:
    """Ranked structures for a problem: `{"dataset": "wine"}`, `{"features": {...}}`, or a
    multipart upload of a CSV/Parquet file with its `target` column. Any body that is not
    multipart is read as JSON (`curl -d` labels it form-urlencoded)."""
    kind = request.headers.get("content-type", JSON).split(";")[0].strip().lower()
    if kind == "multipart/form-data":
        return await _upload(request, props, settings.max_upload_bytes)
    body = await _json_body(request, settings.max_body_bytes)
    if "features" in body:
        freq = _parse(FeaturesProposalRequest, body)
        answer = await _compute(lambda: props.for_features(freq.features, freq.top))
        return _response(answer)
    req = _parse(DatasetProposalRequest, body)
    key = (req.dataset, req.top)
    kept = props.cached(*key)
    if kept is None:  # computed by the first request that asks; the others await it
        kept = await props.answering.arun(key, lambda: _answer(props, *key))
    return Response(kept, media_type=JSON)


def _answer(props: Proposals, dataset: str, top: int) -> bytes:
    """The answer for a known problem as JSON, kept. Blocks: call it from a worker thread."""
    kept = props.cached(dataset, top)  # by a request that finished while this one came
    if kept is None:
        kept = _json(as_problem(lambda: props.for_dataset(dataset, top)))
        props.remember(dataset, top, kept)
    return kept


@router.get("/proposals/features")
def feature_names(_: ReadAccess, props: ProposalsDep) -> FeatureNames:
    """The meta-features the pack's model reads (the keys `features` may use)."""
    return FeatureNames(features=as_problem(props.feature_names))


def _json(answer: dict[str, Any]) -> bytes:
    """The answer checked against the documented schema, as JSON; unset fields (a features
    answer's empty `dataset`) stay out, so the JSON is the library's."""
    return Proposal.model_validate(answer).model_dump_json(exclude_unset=True).encode()


def _response(answer: dict[str, Any]) -> Response:
    return Response(_json(answer), media_type=JSON)


async def _json_body(request: Request, limit: int) -> dict[str, Any]:
    raw = io.BytesIO()  # the route's limit is the uploads': a JSON body has the smaller one
    await spool(request.stream(), raw, limit)
    return json_object(raw.getvalue())


def _parse(model: type[T], data: Any) -> T:
    try:
        return model.model_validate(data)  # type: ignore[attr-defined]
    except ValidationError as err:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])}
                                      for e in err.errors(include_url=False)]) from None


def as_problem(fn: Callable[[], T]) -> T:
    """`fn()` with the proposal errors as problems: no slot free within SLOT_WAIT_S is a
    429 (the `Proposals` methods that compute take one)."""
    try:
        return fn()
    except PackMissing as err:
        raise ApiProblem(503, "no-pack", f"proposals are not available: {err}") from None
    except BadRequest as err:
        raise ApiProblem(422, "invalid-input", str(err), field=err.field) from None
    except ProposalsBusy as busy:
        raise ApiProblem(429, "proposals-busy", str(busy), headers={"Retry-After": "1"}) from None


async def _compute(fn: Callable[[], T]) -> T:
    """`fn()` (as `as_problem`) in the thread pool: it blocks, on a slot among other things."""
    return await run_in_threadpool(as_problem, fn)


# -- uploads -------------------------------------------------------------------------------------
async def _upload(request: Request, props: Proposals, limit: int) -> Response:
    boundary = _form(lambda: boundary_of(request.headers["content-type"]))
    async with spooled(request.stream(), limit) as (body, tmp):
        form = await run_in_threadpool(_form, lambda: _read_form(body, boundary, tmp))
        answer = await _compute(lambda: props.for_file(
            form.path, form.target, form.name, form.task, form.top, form.drop))
    return _response(answer)


class _Form:
    def __init__(self, path: Path, name: str, target: str, task: Any, top: int,
                 drop: tuple[str, ...]) -> None:
        self.path, self.name, self.target, self.task, self.top = path, name, target, task, top
        self.drop = drop


def _read_form(body: BinaryIO, boundary: bytes, tmp: Path) -> _Form:
    parts = named_parts(body, boundary, list(UploadProposalRequest.model_fields))
    if "file" not in parts:
        raise FormError("missing: the table to propose for (a CSV or Parquet file)",
                        "body.file")
    fields = {k: read_part(body, p) for k, p in parts.items() if k != "file"}
    req = _parse(UploadProposalRequest, {"file": b"", **fields})
    path = save_file(body, parts["file"], tmp)
    return _Form(path, file_name(parts["file"].filename), req.target, req.task, req.top,
                 column_list(req.drop))


def _form(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except FormError as err:
        raise ApiProblem(422, "invalid-upload", str(err), field=err.field) from None
