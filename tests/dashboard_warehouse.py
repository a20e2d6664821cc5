"""A warehouse of real runs for the dashboard and plot tests (no tests here): one adaptive
run with rewrites and a rolled-back spike (`aicf-induct adapt`, as tests/cli/test_adapt_cli.py
runs it), the tiny corpus of tests/induction/helpers.py (a real sweep), and `induce fit` on
it: the `correlations` and `rules` tables and a knowledge pack."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

from aicf_induct.cli.main import main
from tests.induction.helpers import build_tiny_corpus

# 320 steps: the deepen at step 300 keeps its 20 guarded steps (a rewrite with fewer steps
# left than the guard's is let pass)
ADAPT = ["adapt", "--dataset", "iris", "--lr", "0.02", "--trigger-warmup", "30",
         "--guard-steps", "20", "--steps", "320", "--inject-spike", "200", "--json"]


@dataclass(frozen=True)
class DashboardWarehouse:
    root: Path
    adapt: dict  # the adapt command's JSON: run_id, rewrites, rollbacks, ...
    pack: Path


def _cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0, argv
    return out.getvalue()


def build(base: Path) -> DashboardWarehouse:
    root = base / "wh"
    adapt = json.loads(_cli(*ADAPT, "--warehouse", str(root)))
    assert adapt["rewrites"] >= 2 and adapt["rollbacks"] >= 1, adapt
    build_tiny_corpus(root)
    pack = base / "pack.parquet"
    _cli("induce", "fit", "--warehouse", str(root), "--min-problems", "2", "--bootstrap",
         "200", "-o", str(pack), "--quiet")
    return DashboardWarehouse(root, adapt, pack)
