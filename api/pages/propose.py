"""The proposal form (`/propose`): pick a known problem or upload a CSV, get the ranked
structures with their evidence. Proposes through the app's `Proposals` (the pack the `pack`
setting names), as `POST /v1/proposals` does; the upload is read as that route reads one
(`api.pages.forms`)."""

from __future__ import annotations

from typing import Any

import duckdb
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from aicf_induct.induction.mining import rule_raises
from aicf_induct.induction.pack import Pack
from aicf_induct.problems.sklearn_datasets import SKLEARN_NAMES
from api.deps import ReadAccess, SettingsDep, WarehouseDep
from api.middleware import BodyTooLarge
from api.pages import report_charts
from api.pages.forms import Form, label, read_form
from api.pages.render import PageRoute, chart, page, templates
from api.proposing import BadRequest, PackMissing, Proposals, ProposalsBusy, known_problems
from api.upload import FormError, column_list
from warehouse import browse

router = APIRouter(include_in_schema=False, route_class=PageRoute)

MAX_TOP_K = 20
templates.env.globals["rule_raises"] = rule_raises  # propose.html: a rule for or against
FIELDS = ("problem", "file", "target", "drop", "top_k")  # the form's inputs (propose.html)


def _pack(request: Request) -> tuple[Pack | None, str | None]:
    """The app's pack, loaded once and kept (the proposals route's), or the one-line reason
    there is none."""
    proposals: Proposals = request.app.state.proposals
    try:
        return proposals.pack(), None
    except PackMissing as err:
        return None, str(err)


def _known(wh: Any, pack: Pack | None) -> list[str]:
    """Problems a user can pick: the bundled ones, the warehouse's and the pack's, those only
    that the service proposes for by name (no `file:` name: it would show a server's path
    and be refused; no name of a table that is not there)."""
    def read(c: duckdb.DuckDBPyConnection) -> list[str]:
        return browse.distinct_values(c, "problem_name")

    held = pack.problems if pack else []
    names = set(SKLEARN_NAMES) | set(wh.read(read)) | set(held)
    return sorted(known_problems(names, set(held)))


def _form(request: Request, wh: Any, pack: Pack | None, pack_error: str | None,
          status: int = 200, **context: Any) -> HTMLResponse:
    ctx = {"problem": "", "target": "", "drop": "", "top_k": 5, "error": None, "note": None,
           "result": None, **context}
    return page(request, "propose.html", status_code=status, title="Propose structures",
                problems=_known(wh, pack), pack=pack, pack_error=pack_error,
                max_top_k=MAX_TOP_K, **ctx)


@router.get("/propose", response_class=HTMLResponse)
def propose_form(request: Request, _: ReadAccess, wh: WarehouseDep) -> HTMLResponse:
    pack, err = _pack(request)
    return _form(request, wh, pack, err)


def _propose(props: Proposals, form: Form, top_k: int) -> dict[str, Any]:
    """Propose for the uploaded table, or for the known problem picked, as the proposals
    route does (a `file:` name is refused: the service reads no file by name; the work that
    computes holds a proposal slot, ProposalsBusy when none frees)."""
    if form.file is None:
        return props.for_dataset(form.fields.get("problem", ""), top_k, field="body.problem")
    out = props.for_file(form.file, form.fields.get("target", ""), form.filename, None, top_k,
                         column_list(form.fields.get("drop")))
    out["dataset"]["name"] = f"{form.filename} (uploaded)"
    return out


@router.post("/propose", response_class=HTMLResponse)
async def propose_submit(request: Request, _: ReadAccess, wh: WarehouseDep,
                         settings: SettingsDep) -> HTMLResponse:
    """The form's answer: the ranked structures, or the form again naming what is wrong."""
    pack, pack_error = await run_in_threadpool(_pack, request)
    error, status = "", 200
    typed: dict[str, str] = {}  # the text fields read before an error: the form keeps them
    try:
        async with read_form(request, FIELDS, settings.max_upload_bytes, typed) as form:
            return await _answer(request, wh, pack, pack_error, form)
    except FormError as err:
        error, status = f"{label(err.field)}: {err}", 422
    except BodyTooLarge as err:  # the whole form, but only a file makes it this large
        error, status = f"file: {err.detail}", 413
    kept = {k: v for k, v in typed.items() if k != "top_k" or v}  # an empty one: the default
    return await run_in_threadpool(_form, request, wh, pack, pack_error, status, error=error,
                                   **kept)


async def _answer(request: Request, wh: Any, pack: Pack | None, pack_error: str | None,
                  form: Form) -> HTMLResponse:
    problem, target = form.fields.get("problem", ""), form.fields.get("target", "")
    has_file = form.file is not None
    ctx: dict[str, Any] = {"problem": problem, "target": target,
                           "drop": form.fields.get("drop", "")}
    try:
        top_k = int(form.fields.get("top_k") or 5)
        if not 1 <= top_k <= MAX_TOP_K:
            raise ValueError
    except ValueError:  # shown again as typed, to be corrected
        return await run_in_threadpool(_form, request, wh, pack, pack_error, 422, **ctx,
                                       top_k=form.fields.get("top_k", ""),
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
    props: Proposals = request.app.state.proposals
    try:
        result = await run_in_threadpool(_propose, props, form, top_k)
    except BadRequest as err:  # named as the form names its inputs: file, target, drop, problem
        return await run_in_threadpool(_form, request, wh, pack, pack_error, 422, **ctx,
                                       error=f"{label(err.field)}: {err}")
    except ProposalsBusy as busy:  # the page, not the API's JSON problem
        return await run_in_threadpool(_form, request, wh, pack, pack_error, 429, **ctx,
                                       error=f"busy: {busy}")
    fig = chart(report_charts.proposal_figure(result["candidates"]), "chart-proposal",
                "Expected normalized error of each proposed structure, with its interval")
    # both given: proposed for the upload (`_propose`); the answer says the pick was not used
    note = (f"Proposed for the uploaded file {form.filename}; the problem picked ({problem}) "
            "was not used.") if has_file and problem else None
    return await run_in_threadpool(_form, request, wh, pack, pack_error, 200, **ctx,
                                   result=result, chart=fig, note=note)
