"""The commands pass the warehouse's tuning store to the runtime (kernels/ import no
warehouse, so this is the only way the GPU autotuner's choices reach `kernel_tuning`), and
none without a warehouse. The backend is asked for on the CPU here; what it does with the
store on a GPU is the cuda tier's (tests/kernels/test_cuda_runtime.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import aicf_induct.runtime.trainer as trainer_module
from aicf_induct.cli.main import main
from aicf_induct.runtime.backend import select_backend
from warehouse.tuning_store import WarehouseTuningStore


@pytest.fixture
def asked(monkeypatch) -> list[object]:
    """The `tuning` each Trainer asked its backend for."""
    seen: list[object] = []

    def spy(kind: str = "auto", **kw):
        seen.append(kw.get("tuning"))
        return select_backend(kind, **kw)

    monkeypatch.setattr(trainer_module, "select_backend", spy)
    return seen


@pytest.mark.parametrize("command", [
    ["train", "--quiet", "--epochs", "1"],
    ["adapt", "--steps", "5", "--json"],
])
def test_a_logged_run_passes_the_warehouse_tuning_store(command, tmp_path: Path, asked,
                                                         capsys) -> None:
    root = tmp_path / "wh"
    assert main([*command, "--dataset", "iris", "--warehouse", str(root)]) == 0
    assert asked and all(isinstance(s, WarehouseTuningStore) for s in asked)
    assert {s.root for s in asked} == {root}  # type: ignore[attr-defined]
    assert asked[0].where == f"{root}/kernel_tuning"  # type: ignore[attr-defined]


def test_an_unlogged_run_keeps_choices_in_memory(asked, capsys) -> None:
    assert main(["train", "--quiet", "--epochs", "1", "--dataset", "iris", "--no-log"]) == 0
    assert asked == [None]
