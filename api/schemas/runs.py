from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from api.schemas.common import Page


class RunPublic(BaseModel):
    run_id: str
    problem_id: str | None
    problem_name: str | None
    task: str | None
    origin: str | None
    status: str = Field(description="`running` (no end logged), `completed`, `failed`, "
                                    "`early_stopped`, `interrupted`")
    seed: int | None
    device: str | None
    parent_run_id: str | None
    started_at: str | None = Field(description="ISO 8601, UTC")
    ended_at: str | None
    steps_taken: int | None
    wall_time_s: float | None
    error: str | None


class RunDetail(RunPublic):
    config: Any = Field(description="model spec, optimizer, schedule, ... (JSON)")
    library_versions: Any
    logged_steps: int


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


class StepPage(Page):
    run_id: str
    items: list[StepPublic]
