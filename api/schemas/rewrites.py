"""Bodies of `POST /v1/rewrites`: a live run's state in, ranked rewrites out."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from aicf_induct.runtime.transforms import TRANSFORMS

Finite = Annotated[float, Field(allow_inf_nan=False)]
Window = Annotated[list[Finite], Field(max_length=10_000)]
TransformName = Annotated[str, Field(min_length=1, max_length=40,
                                     pattern="^(" + "|".join(sorted(TRANSFORMS)) + ")$")]
TRIGGERS = ("warmup", "epoch_end", "plateau", "nan", "spike", "grad_explosion")


class Dynamics(BaseModel):
    """Recent dynamics of the run, oldest first (each window optional)."""

    model_config = ConfigDict(extra="forbid")
    loss: Window = Field(default_factory=list, description="training batch losses")
    val_loss: Window = Field(default_factory=list, description="validation losses")
    grad_norm: Window = Field(default_factory=list, description="gradient norms")
    update_ratio: Window = Field(default_factory=list,
                                 description="||lr * update|| / ||params|| per step")
    train_loss: Finite | None = Field(
        default=None, description="loss on the training rows at the trigger (the gap's "
                                  "denominator); default: the mean of the last 50 batch losses")


class RewriteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ir: dict[str, Any] = Field(description="the run's current IR, canonical JSON "
                                           "(`\"format\": \"aicf.ir/1\"`)")
    trigger: Literal[TRIGGERS] = Field(  # type: ignore[valid-type]
        default="plateau", description="the trigger that fired")
    dynamics: Dynamics = Field(default_factory=Dynamics)
    features: dict[str, Finite] | None = Field(
        default=None, max_length=1000,
        description="the problem's meta-features (`simple.n_rows` is the one used)")
    problem: str | None = Field(default=None, min_length=1, max_length=300,
                                description="or a problem name to featurise, e.g. `wine`")
    task: Literal["classification", "regression"] | None = None
    blocked: list[TransformName] = Field(default_factory=list, max_length=16,
                                         description="blacklisted transforms")
    top: StrictInt = Field(default=3, ge=1, le=len(TRANSFORMS))  # a JSON integer


class RewritePublic(BaseModel):
    transform: str
    site: str = Field(description="IR node id where it applies")
    options: dict[str, Any]
    expected_effect: float = Field(description="expected uplift of the relative fall of the "
                                               "validation loss over the guard window, over "
                                               "leaving the model alone")
    low: float
    high: float
    evidence: dict[str, Any] = Field(description="condition, observations per level, the "
                                                 "transform's and the control's effect, "
                                                 "guard verdicts")


class RewriteAnswerPublic(BaseModel):
    decision: Literal["rewrite", "none"]
    reason: str
    condition: dict[str, str]
    level: float = Field(description="coverage of the intervals")
    rewrites: list[RewritePublic] = Field(description="proposed, best first")
    considered: list[RewritePublic] = Field(description="every transform that applies")
    history: int = Field(description="decisions the estimate learned from")
    source: dict[str, Any] = Field(description="the pack and warehouse the history came from")
