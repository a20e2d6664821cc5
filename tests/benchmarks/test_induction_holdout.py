"""benchmarks/induction_holdout.py scores a pack on a held-out warehouse, and reads the same
held-out meta-dataset back from the file it saves (how a GPU machine's sweep comes back)."""

from __future__ import annotations

from pathlib import Path

from aicf_induct.cli.main import main
from aicf_induct.induction.space_io import parse_space
from tests.benchmarks.scripts import run_script
from tests.induction.helpers import TINY_HELD_OUT, TINY_SPACE, build_tiny_corpus


def _run(*args: str) -> str:
    out = run_script("induction_holdout.py", *args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_holdout_benchmark_from_a_warehouse_and_from_its_saved_meta(
        tmp_path: Path) -> None:
    corpus = build_tiny_corpus(tmp_path / "corpus")
    pack = tmp_path / "pack.parquet"
    assert main(["induce", "fit", "--warehouse", str(corpus), "--min-problems", "2",
                 "--bootstrap", "100", "-o", str(pack), "--quiet"]) == 0
    held = build_tiny_corpus(tmp_path / "held", TINY_HELD_OUT)
    saved = tmp_path / "held_meta.parquet"
    default = ("--default", parse_space(TINY_SPACE).candidates()[0].key)
    first = _run("--warehouse", str(held), "--pack", str(pack), *default, "--save-meta",
                 str(saved))
    again = _run("--meta", str(saved), "--pack", str(pack), *default)
    assert "Held out: 2 problems (2 groups) × 4 candidates × 2 seeds, every (2) split" in first
    assert "Calibration of the pack's 80% intervals" in first
    for name in TINY_HELD_OUT:
        assert f"| {name} |" in first
    # the header's first line holds the wall time; everything after it is the same
    assert first.split("\n", 1)[1] == again.split("\n", 1)[1]
