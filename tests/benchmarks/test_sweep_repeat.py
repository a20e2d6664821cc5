"""benchmarks/sweep_repeat.py sets two sweeps of the same runs side by side: identical runs,
a planted difference, and files that do not hold the same runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from aicf_induct.induction.meta_dataset import ID_COLUMNS
from aicf_induct.induction.meta_file import write_meta_file
from tests.benchmarks.scripts import run_script


def _meta(n: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    meta = pd.DataFrame({c: "x" for c in ID_COLUMNS}, index=range(n))
    meta["problem"] = [f"p{i // 4}" for i in range(n)]
    meta["candidate"] = [f"c{i % 4}" for i in range(n)]
    meta["seed"] = 0
    for col in ("val_score", "test_score", "val_error", "test_error", "val_norm_error",
                "test_norm_error", "rank_score", "lr", "weight_decay"):
        meta[col] = rng.uniform(0, 1, n)
    meta["param_steps"] = rng.integers(1000, 9000, n).astype(float)
    return meta


def test_identical_sweeps_and_a_planted_difference(tmp_path: Path) -> None:
    a = _meta()
    b = a.copy()
    b.loc[3, "test_score"] += 0.02  # one run far apart
    b.loc[5, "test_score"] += 1e-12  # one within rounding
    b.loc[3, "param_steps"] += 500  # and stopped elsewhere
    write_meta_file(a, tmp_path / "a.parquet")
    write_meta_file(b, tmp_path / "b.parquet")
    out = run_script("sweep_repeat.py", str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"))
    assert out.returncode == 0, out.stderr
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in out.stdout.splitlines() if line.startswith("| ") and "column" not in line}
    assert rows["val_score"] == ["12", "100.0%", "0", "0", "0"]
    assert rows["test_score"][:2] == ["12", "83.3%"] and rows["test_score"][4] == "1"
    assert abs(float(rows["test_score"][2]) - 0.02) < 1e-9
    assert rows["param_steps"][1:] == ["91.7%", "500", "41.7", "1"]


def test_runs_not_in_both_files_and_a_missing_file(tmp_path: Path) -> None:
    a = _meta()
    write_meta_file(a, tmp_path / "a.parquet")
    write_meta_file(a.iloc[:8], tmp_path / "b.parquet")
    out = run_script("sweep_repeat.py", str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"))
    assert out.returncode == 2
    assert out.stderr.strip() == ("error: 4 runs are not in the second file, e.g. problem 'p2', "
                                  "candidate c0, seed 0")
    out = run_script("sweep_repeat.py", str(tmp_path / "a.parquet"), str(tmp_path / "no.parquet"))
    assert out.returncode == 2 and "no.parquet: no such meta-dataset file" in out.stderr
    assert "Traceback" not in out.stderr
