"""The proposal form (`/propose`): pick a known problem or upload a CSV, get the ranked
structures with their evidence. Calls the library (`induction.proposals.propose_dataset`)
on the pack the `pack` setting names, as `aicf-induct propose` does."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

import duckdb
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from aicf_induct.errors import AicfError
from aicf_induct.induction.pack import Pack
from aicf_induct.induction.proposals import propose_dataset
from aicf_induct.problems.sklearn_datasets import SKLEARN_NAMES
from api.deps import ReadAccess, WarehouseDep
from api.pages import report_charts
from api.pages.forms import FormError, parse_form, text
from api.pages.render import chart, page
from api.proposing import PackMissing, Proposals
from warehouse import browse

router = APIRouter(include_in_schema=False)

MAX_TOP_K = 20


def _pack(request: Request) -> tuple[Pack | None, str | None]:
    """The app's pack, loaded once and kept (the proposals route's), or the one-line reason
    there is none."""
    proposals: Proposals = request.app.state.proposals
    try:
        return proposals.pack(), None
    except PackMissing as err:
        return None, str(err)


def _known(wh: Any, pack: Pack | None) -> list[str]:
    """Problems a user can pick: the bundled ones, the warehouse's and the pack's."""
    def read(c: duckdb.DuckDBPyConnection) -> list[str]:
        return browse.distinct_values(c, "problem_name")

    names = set(SKLEARN_NAMES) | set(wh.read(read)) | set(pack.problems if pack else [])
    return sorted(names)


def _form(request: Request, wh: Any, pack: Pack | None, pack_error: str | None,
          status: int = 200, **context: Any) -> HTMLResponse:
    ctx = {"problem": "", "target": "", "top_k": 5, "error": None, "result": None, **context}
    return page(request, "propose.html", status_code=status, title="Propose structures",
                problems=_known(wh, pack), pack=pack, pack_error=pack_error,
                max_top_k=MAX_TOP_K, **ctx)


@router.get("/propose", response_class=HTMLResponse)
def propose_form(request: Request, _: ReadAccess, wh: WarehouseDep) -> HTMLResponse:
    pack, err = _pack(request)
    return _form(request, wh, pack, err)


def _safe_name(filename: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(filename).name).strip("._") or "upload"
    return stem if stem.lower().endswith((".csv", ".tsv")) else stem + ".csv"


def _propose(dataset: str, data: bytes | None, filename: str, pack: Pack,
             top_k: int) -> dict[str, Any]:
    """Propose for a known problem, or for the uploaded bytes written to a temporary file
    (removed after) under the upload's own (sanitised) name."""
    if data is None:
        return propose_dataset(dataset, pack, top_k)
    with tempfile.TemporaryDirectory(prefix="aicf-upload-") as tmp:
        path = Path(tmp) / _safe_name(filename)
        path.write_bytes(data)
        try:
            out = propose_dataset(f"file:{path}{dataset}", pack, top_k)
        except AicfError as err:  # the message names the upload, not the temporary path
            raise type(err)(str(err).replace(str(path), path.name)) from None
    out["dataset"]["name"] = f"{path.name} (uploaded)"
    return out


@router.post("/propose", response_class=HTMLResponse)
async def propose_submit(request: Request, _: ReadAccess, wh: WarehouseDep) -> HTMLResponse:
    """The form's answer: the ranked structures, or the form again naming what is wrong."""
    pack, pack_error = await run_in_threadpool(_pack, request)
    try:
        form = parse_form(request.headers.get("content-type", ""), await request.body())
    except FormError as err:
        return await run_in_threadpool(_form, request, wh, pack, pack_error, 400,
                                       error=f"form: {err}")
    problem, target = text(form, "problem"), text(form, "target")
    upload = form.get("file")
    has_file = upload is not None and bool(upload.filename) and bool(upload.value)
    ctx: dict[str, Any] = {"problem": problem, "target": target}
    try:
        top_k = int(text(form, "top_k") or 5)
        if not 1 <= top_k <= MAX_TOP_K:
            raise ValueError
    except ValueError:
        return await run_in_threadpool(_form, request, wh, pack, pack_error, 422, **ctx,
                                       error=f"top_k: a whole number from 1 to {MAX_TOP_K}")
    ctx["top_k"] = top_k
    error = None
    if pack is None:
        error = f"no proposals: {pack_error}"
    elif has_file and not target:
        error = "target: name the column of the uploaded CSV to predict"
    elif not has_file and not problem:
        error = "problem: pick a known problem or upload a CSV"
    if error:
        status = 503 if pack is None else 422
        return await run_in_threadpool(_form, request, wh, pack, pack_error, status, **ctx,
                                       error=error)
    assert pack is not None
    args: tuple[str, bytes | None, str] = (problem, None, "")
    if has_file:
        assert upload is not None
        args = (f"?target={quote(target, safe='')}", upload.value, upload.filename or "")
    try:
        result = await run_in_threadpool(_propose, args[0], args[1], args[2], pack, top_k)
    except AicfError as err:
        where = "file" if has_file else "problem"
        return await run_in_threadpool(_form, request, wh, pack, pack_error, 422, **ctx,
                                       error=f"{where}: {err}")
    fig = chart(report_charts.proposal_figure(result["candidates"]), "chart-proposal")
    return await run_in_threadpool(_form, request, wh, pack, pack_error, 200, **ctx,
                                   result=result, chart=fig)
