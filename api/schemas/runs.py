from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aicf_induct.records import RUN_STATUSES
from api.schemas.common import NAME_MAX, AnyWhenBlank, Page

STATUSES = ", ".join(f"`{s}`" for s in RUN_STATUSES)
# a status filter: one the warehouse knows, or "" (a form's "any"); another is a 422 naming
# it, not an empty page
STATUS_FILTER = f"^({'|'.join(('', *RUN_STATUSES))})$"


class RunsQuery(BaseModel):
    """`GET /v1/runs`'s query: an unknown parameter (a typo, `sort=`) is a 422 naming it, as
    the reports routes answer, not silently the default page."""

    model_config = ConfigDict(extra="forbid")
    problem: AnyWhenBlank = Field(default=None, max_length=NAME_MAX, description="name or id")
    origin: AnyWhenBlank = Field(default=None, max_length=NAME_MAX,
                                 description="`cli`, `sweep`, `adapt`, ...")
    # "" (any) is in the pattern so the document says what the route accepts
    status: AnyWhenBlank = Field(default=None, pattern=STATUS_FILTER,
                                 description=f"one of {STATUSES}; empty: any")
    limit: int = Field(default=50, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=2**62, description="rows to skip")


class StepsQuery(BaseModel):
    """`GET /v1/runs/{run_id}/steps`'s query: an unknown parameter is a 422 naming it, as
    `GET /v1/runs` answers."""

    model_config = ConfigDict(extra="forbid")
    limit: int = Field(default=1000, ge=1, le=10_000)
    offset: int = Field(default=0, ge=0, le=2**62, description="rows to skip")


class RunPublic(BaseModel):
    run_id: str
    problem_id: str | None
    problem_name: str | None
    task: str | None
    origin: str | None
    status: str = Field(description=f"one of {STATUSES}: `running` while no end is logged "
                                    "and its writer lives, `abandoned` when its writer died "
                                    "without logging one")
    seed: int | None
    device: str | None
    parent_run_id: str | None
    started_at: str | None = Field(description="ISO 8601, UTC")
    ended_at: str | None
    steps_taken: int | None
    wall_time_s: float | None
    error: str | None


class ChildRun(BaseModel):
    run_id: str
    origin: str | None = Field(description="`fork` for a branch `adapt --fork` or "
                                           "`AdaptiveRun.fork()` started")
    status: str = Field(description=f"one of {STATUSES}")
    from_step: int | None = Field(description="the step it branched at: the earlier of its "
                                              "first step row and its `fork start` event; "
                                              "null when it logged neither")


class RunDetail(RunPublic):
    config: Any = Field(description="model spec, optimizer, schedule, ... (JSON)")
    library_versions: Any
    logged_steps: int = Field(description="step rows logged, a branch a rollback dropped "
                                          "included (its steps count twice)")
    live_steps: int = Field(description="step rows on the path the run took (SQL's "
                                        "`live_steps`): `logged_steps` less the rows of the "
                                        "branches its rollbacks dropped")
    children: list[ChildRun] = Field(description="the runs branched from this one (their "
                                                 "`parent_run_id` is its id), oldest first")


class RunPage(Page):
    items: list[RunPublic]


class StepPublic(BaseModel):
    step: int
    epoch: int | None
    loss: float | None = Field(description="null when not finite (a diverged step)")
    grad_norm: float | None
    update_ratio: float | None
    lr: float | None
    step_time_s: float | None
    batch_size: int | None
    trajectory: int = Field(description="the run's rollbacks before the step: a rollback logs "
                                        "the step numbers past its target again under the "
                                        "next (0: none; also for rows logged before the field)")


class StepPage(Page):
    run_id: str
    items: list[StepPublic]
