"""What a sweep trains, and the checks it passes before it touches the warehouse: the spec
(problems × candidates × seeds, with the shared training settings and the protocol hash that
says which runs finish a triple), the plan by problem name (`check_sweep`, which `run_sweep`
and the dry run both call), and the (problem, candidate) pairs where a candidate applies."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aicf_induct.errors import ConfigError
from aicf_induct.induction.space import Candidate
from aicf_induct.induction.sweep_worker import is_remote
from aicf_induct.runtime.trainer import TrainConfig

ENGINES = ("local", "ray", "gpu")
RECIPE_FIELDS = ("optimizer", "lr", "weight_decay", "batch_size", "seed")

Triple = tuple[str, str, int]  # (problem_id, candidate key, seed)


@dataclass(frozen=True)
class SweepSpec:
    """What to train: problems × candidates × seeds, with the shared training settings."""

    problems: tuple[str, ...]  # a str: that one problem
    candidates: tuple[Candidate, ...]
    seeds: tuple[int, ...] = (0,)
    # the candidate's recipe and the seed override these
    train: TrainConfig = field(default_factory=TrainConfig)
    budget_s: float = 0.0  # wall-clock budget per run; 0: none

    def __post_init__(self) -> None:
        if isinstance(self.problems, str):  # one name, not one problem per character
            object.__setattr__(self, "problems", (self.problems,))
        if not self.problems or not self.candidates or not self.seeds:
            raise ConfigError("a sweep needs at least one problem, candidate and seed")
        if self.budget_s < 0:
            raise ConfigError(f"the per-run budget must be >= 0 s, got {self.budget_s}")

    @property
    def protocol(self) -> str:
        """Hash of the training settings outside the candidate: runs under another protocol
        (say, more epochs) are other experiments and do not finish a triple."""
        return protocol_of(self.train)

    def sweep_id(self, problem_ids: Iterable[str]) -> str:
        return _hash([self.protocol, sorted(problem_ids), sorted(c.key for c in self.candidates),
                      sorted(self.seeds)])


def protocol_of(train: TrainConfig) -> str:
    """The protocol of a sweep trained with `train` (`SweepSpec.protocol`)."""
    return _hash({k: v for k, v in dataclasses.asdict(train).items() if k not in RECIPE_FIELDS})


def _hash(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep will train, by problem name (its dry run): the (problem, candidate)
    pairs where the candidate applies (`Candidate.applies_to`), times the seeds. A problem
    whose table fails to load is found only by loading it (`sweep.load_problems`, which the
    sweep and its dry run call; the sweep leaves it out): `plan_of` the problems that load
    is then what the sweep trains."""

    problems: tuple[str, ...]  # those with at least one run
    candidates: tuple[Candidate, ...]  # those that apply to at least one problem
    seeds: tuple[int, ...]
    pairs: int  # applicable (problem, candidate) pairs

    @property
    def runs(self) -> int:
        return self.pairs * len(self.seeds)

    def as_dict(self) -> dict[str, Any]:
        return {"problems": list(self.problems), "runs": self.runs,
                "candidates": [{"key": c.key, "structure": c.structure_key}
                               for c in self.candidates], "seeds": list(self.seeds)}


def applicable(spec: SweepSpec, names: Iterable[str]) -> list[tuple[str, Candidate]]:
    """The (problem, candidate) pairs a sweep trains: cnn candidates on image-shaped
    problems only (`Candidate.applies_to`)."""
    return [(name, cand) for name in names for cand in spec.candidates
            if cand.applies_to(name)]

def check_sweep(spec: SweepSpec, root: str | Path, *, workers: int = 1,
                engine: str = "local", processes: int = 1) -> SweepPlan:
    """Every check a sweep passes before it touches the warehouse (`run_sweep` and the dry
    run both call it): the engine's settings, problem names that name no table, a space none
    of whose candidates applies. Returns the plan by name."""
    from aicf_induct.problems.registry import names_without_table

    if engine not in ENGINES:
        raise ConfigError(f"unknown engine '{engine}' (valid: {', '.join(ENGINES)})")
    if workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    if processes < 1:
        raise ConfigError(f"processes must be >= 1, got {processes}")
    if processes > 1 and engine != "gpu":
        raise ConfigError(f"{processes} engine processes need engine 'gpu' (the "
                          f"'{engine}' engine already runs `workers` runs at once)")
    if processes > 1 and is_remote(root):
        raise ConfigError("several engine processes split their triples through claims in a "
                          "warehouse's directory: log to a warehouse, not through the service")
    if engine == "gpu" and spec.train.backend != "numpy":
        from aicf_induct.runtime.backend import gpu_available

        if not gpu_available():
            raise ConfigError("engine 'gpu' needs an NVIDIA GPU with CuPy, and none is seen "
                              "here (with backend numpy it runs its runs on the CPU, in this "
                              "process)")
    unknown = names_without_table(spec.problems)
    if unknown:
        raise ConfigError(f"{len(unknown)} of the problems name no table: " + "; ".join(
            f"{k}: {v}" for k, v in unknown.items()))
    sweep_plan = plan_of(spec, spec.problems)
    if not sweep_plan.pairs:
        from aicf_induct.problems.sklearn_datasets import IMAGE_SIDES

        raise ConfigError("no candidate of the space applies to the problems "
                          f"({_few(spec.problems)}): cnn candidates train on image-shaped "
                          f"problems only ({', '.join(IMAGE_SIDES)})")
    return sweep_plan


def plan_of(spec: SweepSpec, names: Iterable[str]) -> SweepPlan:
    """The plan of `spec` over the problems `names` (all of the spec's, or those that
    loaded), unchecked."""
    pairs = applicable(spec, names)
    return SweepPlan(tuple(dict.fromkeys(n for n, _ in pairs)),
                     tuple(c for c in spec.candidates if any(c is d for _, d in pairs)),
                     spec.seeds, len(pairs))


def _few(names: Sequence[str], n: int = 4) -> str:
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")
