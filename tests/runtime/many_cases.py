"""Shared cases of the many-runs tests (no tests here): models that cover every option of the
corpus space (activation, normalisation, residual, dropout), trained alone (`Trainer.fit`)
and together (`runtime.many.train_many`), each run into a recorder of its own."""

from __future__ import annotations

import dataclasses
from typing import Any

from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.problems.problem import Problem
from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime.many import train_many
from aicf_induct.runtime.trainer import TrainConfig, Trainer

# every act, norm, residual and dropout value of `aicf-induct space show corpus32`
SPECS = (
    "mlp:depth=2,width=16,act=relu,norm=batchnorm,residual=false,dropout=0.1",
    "mlp:depth=2,width=16,act=gelu,norm=layernorm,residual=true,dropout=0.3",
    "mlp:depth=1,width=32,act=tanh,norm=none,residual=true,dropout=0.0",
    "mlp:depth=3,width=16,act=silu,norm=none,residual=false,dropout=0.0,profile=funnel",
    "mlp:depth=2,width=24,act=relu,norm=none,residual=false,dropout=0.0",
    "mlp:depth=2,width=16,act=silu,norm=batchnorm,residual=true,dropout=0.3,profile=bottleneck",
)


def trainer(problem: Problem, spec: str, config: TrainConfig, rec: MemoryRecorder) -> Trainer:
    """`spec` ending in "|float32": the model in float32 (sweeps train float64 models)."""
    spec, _, dtype = spec.partition("|")
    graph = mlp_graph(parse_model_spec(spec), problem.n_features, problem.n_outputs,
                      dtype=dtype or "float64")
    return Trainer(problem, graph, config, recorder=rec, run_id=f"{spec}|{config.seed}")


def alone(cases: list[tuple[Problem, str, TrainConfig]]) -> list[MemoryRecorder]:
    out = []
    for problem, spec, config in cases:
        rec = MemoryRecorder()
        trainer(problem, spec, config, rec).fit()
        out.append(rec)
    return out


def together(cases: list[tuple[Problem, str, TrainConfig]]) -> list[MemoryRecorder]:
    recs = [MemoryRecorder() for _ in cases]
    results = train_many([trainer(p, s, c, r) for (p, s, c), r in zip(cases, recs,
                                                                          strict=True)])
    assert not [r for r in results if isinstance(r, BaseException)], results
    return recs


def rows(rec: MemoryRecorder) -> dict[str, Any]:
    """What a run logged, minus wall times and dates."""
    return {
        "steps": [(s.step, s.epoch, s.loss, s.grad_norm, s.update_ratio, s.lr, s.batch_size)
                  for s in rec.steps],
        "results": [(r.step, r.epoch, r.split, r.metric, r.value, r.final)
                    for r in rec.results],
        "snapshots": [(s.step, s.reason, s.fingerprint) for s in rec.snapshots],
        "ends": [(e.status, e.steps, e.error) for e in rec.run_ends],
        "starts": [(r.problem_id, r.seed, r.device, r.origin) for r in rec.runs],
        "problems": [dataclasses.replace(p) for p in rec.problems],
    }
