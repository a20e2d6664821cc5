"""Ingest bodies (documentation of what `warehouse/ingest.py` checks) and its answer.

The records' fields are those of `aicf_induct.records`; the routes check them value by value
themselves (to name the offending one as `steps[3].loss`), so these models only describe
the bodies in the OpenAPI document."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

BATCH_ID = Field(min_length=1, max_length=128,
                 description="client-chosen id: a batch sent again with the same id (and "
                             "the same bytes) is not written again, also after a server "
                             "restart; the id with other bytes is a 409")


TRAJECTORY = ("the run's rollbacks before the record: after a rollback the run logs the step "
              "numbers past its target again under the next (the warehouse's live_steps and "
              "live_results keep the path taken)")


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProblemIn(_In):
    problem_id: str
    name: str
    source: str
    task: str
    n_rows: int
    n_features: int
    n_classes: int
    target: str
    features: dict[str, float] = Field(default_factory=dict)
    features_split_seed: int | None = Field(
        None, description="the seed whose training split the features were computed on "
                          "(runs log seed 0's, the split `propose` featurises)")


class RunIn(_In):
    run_id: str
    problem_id: str
    problem_name: str
    task: str
    config: dict[str, Any]
    seed: int
    device: str
    library_versions: dict[str, str]
    origin: str
    parent_run_id: str | None = None
    started_at: str | None = Field(default=None, description="ISO 8601; default: now")


class SnapshotIn(_In):
    run_id: str
    step: int
    reason: str
    ir_json: str
    fingerprint: str
    param_count: int
    patterns: dict[str, float] = Field(default_factory=dict)


class StepIn(_In):
    run_id: str
    step: int
    epoch: int
    loss: float
    grad_norm: float
    update_ratio: float
    lr: float
    step_time_s: float
    batch_size: int
    trajectory: int = Field(0, ge=0, description=TRAJECTORY)


class EventIn(_In):
    run_id: str
    step: int
    kind: str
    name: str
    detail: dict[str, Any] = Field(default_factory=dict)
    metrics_before: dict[str, float] = Field(default_factory=dict)
    metrics_after: dict[str, float] = Field(default_factory=dict)
    at: str | None = Field(default=None, description="ISO 8601; default: now")


class ResultIn(_In):
    run_id: str
    step: int
    epoch: int
    split: str
    metric: str
    value: float
    final: bool = False
    trajectory: int = Field(0, ge=0, description=TRAJECTORY)


EndStatus = Literal["completed", "early_stopped", "timeout", "failed", "interrupted"]


class RunEndIn(_In):
    run_id: str
    status: EndStatus | Literal["resumed"] = Field(
        description="how the run ended; `resumed`: no end, the run went on from a checkpoint "
                    "(the service's copy reads `running` until its next end)")
    steps: int = Field(ge=0)
    wall_time_s: float = Field(ge=0)
    error: str | None = None
    ended_at: str | None = Field(default=None, description="ISO 8601; default: now")


class IngestBatch(_In):
    """Records of any kinds, written together (all or nothing)."""

    batch_id: str = BATCH_ID
    problems: list[ProblemIn] = Field(default_factory=list)
    runs: list[RunIn] = Field(default_factory=list)
    snapshots: list[SnapshotIn] = Field(default_factory=list)
    steps: list[StepIn] = Field(default_factory=list)
    events: list[EventIn] = Field(default_factory=list)
    results: list[ResultIn] = Field(default_factory=list)
    run_ends: list[RunEndIn] = Field(default_factory=list)


class RunCreate(_In):
    batch_id: str = BATCH_ID
    run: RunIn
    problem: ProblemIn | None = None


class RunEnd(_In):
    batch_id: str = BATCH_ID
    status: EndStatus
    steps: int = Field(ge=0)
    wall_time_s: float = Field(ge=0)
    error: str | None = None
    ended_at: str | None = None


class IngestResult(BaseModel):
    batch_id: str
    written: bool = Field(description="false: this batch id was committed before; nothing "
                                      "was written now")
    rows: dict[str, int] = Field(description="table -> rows of the batch")


class KeyCheck(BaseModel):
    scope: str
