"""benchmarks/induction_variants.py's pieces: the top-1 rule with its departure threshold,
a held-out problem's scoring, and `--by-task`'s fold on one group of the shipped pack."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import induction_variants as iv


def test_the_top1_leaves_the_anchor_only_beyond_the_threshold() -> None:
    mm = SimpleNamespace(candidates_=pd.DataFrame(index=["a", "b", "c"]))
    gains = np.array([0.0, -0.04, 0.02])  # b predicted 0.04 better than the anchor a
    assert iv.top1(mm, gains, "a") == "b"
    assert iv.top1(mm, gains, "a", threshold=0.05) == "a"
    assert iv.top1(mm, gains, "a", threshold=0.03) == "b"
    assert iv.top1(mm, gains, "a", allowed={"a", "c"}) == "a"


def test_a_held_out_problem_is_scored_on_its_own_seeds() -> None:
    pid = str(iv.TEST_B.index[0])
    feats, err, pick = iv.held_out(pid, expectation=False)
    best = str(iv.TEST_B.loc[pid].idxmin())
    assert err(best) == float(iv.TEST_B.loc[pid, best])
    assert err("no such candidate") == 1.0
    ranked = list(iv.CANDS[:5])
    assert pick(ranked) == ranked[int(np.argmin(iv.VAL_A.loc[pid, ranked].to_numpy()))]
    assert set(feats) == set(iv.FCOLS)
    _, err_all, _ = iv.held_out(pid, expectation=True)
    assert err_all(best) == float(iv.TEST_ALL.loc[pid, best])


def test_by_task_fits_on_the_held_out_problems_task() -> None:
    group = sorted(iv.META["group"].unique())[0]
    rows = iv.task_fold([group])
    assert rows and all(r["group"] == group for r in rows)
    for r in rows:
        assert r["task"] == iv.TASK[r["problem_id"]]
        assert r["t_inner"] in iv.THRESHOLDS
        for name in ("gain", "gain_by_task", "gain_by_task_threshold", "knn3",
                     "portfolio3", "average3", "default", "full_search"):
            assert 0.0 <= r[name] <= 1.0, name
