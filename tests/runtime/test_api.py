"""The runtime as a notebook sees it: the package's names (each its module's object, loaded
on first use), short reprs, and results as the CLI's `--json` prints them."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

import aicf_induct.runtime as runtime
from aicf_induct.records import MemoryRecorder
from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun, AdaptResult
from aicf_induct.runtime.policies import ProposalPolicy
from aicf_induct.runtime.trainer import TrainConfig
from tests.runtime.test_adaptive_fixtures import toy_graph, toy_problem


def test_every_name_is_the_object_its_module_defines() -> None:
    assert {"Trainer", "TrainConfig", "AdaptiveRun", "AdaptConfig", "make_policy"} <= \
        set(runtime.__all__)
    for name in runtime.__all__:
        home = importlib.import_module(f"aicf_induct.runtime.{runtime._HOME[name]}")
        assert getattr(runtime, name) is getattr(home, name), name
    assert set(runtime.__all__) <= set(dir(runtime))
    with pytest.raises(AttributeError, match="no attribute 'Trainr'"):
        runtime.Trainr  # noqa: B018  (the lookup is the test)


def test_importing_one_module_does_not_load_the_trainer() -> None:
    """What the CLI relies on: `from aicf_induct.runtime import snapshot` runs the package's
    `__init__`, which must not import the trainer (a second and more)."""
    code = ("import sys, aicf_induct.runtime.snapshot; "
            "print('aicf_induct.runtime.trainer' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


@pytest.fixture(scope="module")
def ended() -> tuple[AdaptiveRun, AdaptResult]:
    problem = toy_problem("classification", n=300, seed=2)
    run = AdaptiveRun(problem, toy_graph(problem), TrainConfig(lr=1e-2),
                      AdaptConfig(steps=40, warmup_steps=0), ProposalPolicy(lambda obs: []),
                      recorder=MemoryRecorder())
    return run, run.run()


def test_reprs_are_short_and_say_what_matters(ended: tuple[AdaptiveRun, AdaptResult],
                                              tmp_path: Path) -> None:
    """A snapshot printed every parameter (178 kB on wine), a result its graph, history and
    events (32 kB); the run and the recorder said nothing but their address."""
    from warehouse.recorder import WarehouseRecorder

    run, result = ended
    params = run.trainer.graph.param_count()
    text = repr(run)
    assert text.startswith(f"AdaptiveRun(run_id='{run.run_id}', step=40 of 40, work=40, ")
    assert f"{params:,} parameters" in text and text.endswith("ended completed)")
    snap = repr(run.snapshot())
    assert snap.startswith("Snapshot(step=40, ") and f"{params:,} parameters" in snap
    assert len(snap) < 300 and len(repr(run.snapshot().state)) < 300
    res = repr(result)
    assert res.startswith(f"AdaptResult(run_id='{run.run_id}', status='completed', ")
    assert "val_loss=" in res and "events=<" in res and len(res) < 600
    rec = WarehouseRecorder(tmp_path / "wh")
    try:
        assert repr(rec) == f"WarehouseRecorder({str(tmp_path / 'wh')!r})"
    finally:
        rec.close()


def test_a_result_as_dict_is_json_as_the_cli_prints_it(
        ended: tuple[AdaptiveRun, AdaptResult]) -> None:
    res = ended[1]
    d = res.as_dict()
    assert list(d)[:8] == ["run_id", "status", "steps", "executed_steps", "rewrites",
                           "rollbacks", "param_count", "pause_ms"]
    assert d["executed_steps"] == res.work and d["param_count"] == res.graph.param_count()
    assert d["val_loss"] == res.metrics["val_loss"]
    diverged = dataclasses.replace(res, metrics={**res.metrics, "test_loss": math.nan})
    text = json.dumps(diverged.as_dict(), allow_nan=False)  # null, as --json prints it
    assert json.loads(text)["test_loss"] is None
