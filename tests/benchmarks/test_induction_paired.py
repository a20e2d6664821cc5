"""benchmarks/induction_paired.py pools saved rows and pairs two proposers problem by
problem; sides that score different problems, or one problem twice, are one-line errors."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from tests.benchmarks.scripts import run_script

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from induction_bench import save_result

from aicf_induct.induction.lopo import LopoResult

METHODS = {"default": 0.6, "full_search": 0.4, "knn": 0.5, "portfolio": 0.5, "average": 0.55}


def _rows(ids: list[str], proposer: np.ndarray) -> LopoResult:
    """Every method at k = 1, 3, 5 on each problem: the baselines at fixed errors, the
    proposer at `proposer` (one per problem)."""
    rows = []
    for i, pid in enumerate(ids):
        for k in (1, 3, 5):
            for method, err in {**METHODS, "proposer": proposer[i]}.items():
                rows.append({"problem_id": pid, "problem": f"p{pid}", "group": pid, "k": k,
                             "method": method, "candidate": "c", "norm_error": err,
                             "regret": 0.0})
    return LopoResult(pd.DataFrame(rows), pd.DataFrame(
        {"problem_id": ids, "candidate": "c", "inside": True}), 0.8)


def test_two_sides_pooled_and_paired(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    ids = [f"{i:016x}" for i in range(40)]
    b = rng.uniform(0.45, 0.55, 40)
    a = b - 0.05 + rng.normal(0, 0.01, 40)
    # A in two folders (two held-out sets), B in one
    save_result(_rows(ids[:25], a[:25]), tmp_path / "a1")
    save_result(_rows(ids[25:], a[25:]), tmp_path / "a2")
    save_result(_rows(ids, b), tmp_path / "b")
    done = run_script("induction_paired.py", "--a", str(tmp_path / "a1"), str(tmp_path / "a2"),
                      "--b", str(tmp_path / "b"), "--ks", "1,3")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "same 40 problems" in lines[0]
    k1 = next(line for line in lines if line.startswith("| 1 |")).split("|")
    assert int(k1[2]) == 40 and float(k1[3]) == 1.0  # A is lower on every problem
    assert abs(float(k1[4]) - (a - b).mean()) < 5e-4 * abs((a - b).mean())
    assert float(k1[5]) < (a - b).mean() < float(k1[6]) < 0 and float(k1[7]) < 1e-6
    gap_a = (0.6 - a.mean()) / (0.6 - 0.4)
    assert next(line for line in lines if line.startswith("A:")).count(f"{gap_a:.0%}") == 1


def test_sides_of_other_problems_or_a_problem_twice_are_errors(tmp_path: Path) -> None:
    ids = [f"{i:016x}" for i in range(6)]
    err = np.full(6, 0.5)
    save_result(_rows(ids, err), tmp_path / "a")
    save_result(_rows(ids[:5], err[:5]), tmp_path / "b")
    done = run_script("induction_paired.py", "--a", str(tmp_path / "a"), "--b",
                      str(tmp_path / "b"))
    assert done.returncode != 0 and done.stderr.strip().splitlines() == [
        "error: the two sides score different problems (1 only in --a, 0 only in --b)"]
    done = run_script("induction_paired.py", "--a", str(tmp_path / "a"), str(tmp_path / "b"),
                      "--b", str(tmp_path / "a"))
    assert done.returncode != 0 and done.stderr.strip().splitlines() == [
        f"error: problem {ids[0]} is in both {tmp_path / 'a'} and {tmp_path / 'b'}"]


def test_one_side_alone_prints_its_pooled_figures(tmp_path: Path) -> None:
    ids = [f"{i:016x}" for i in range(30)]
    err = np.linspace(0.42, 0.58, 30)  # mean 0.5: the default 0.6, the full search 0.4
    save_result(_rows(ids[:10], err[:10]), tmp_path / "x")
    save_result(_rows(ids[10:], err[10:]), tmp_path / "y")
    done = run_script("induction_paired.py", "--a", str(tmp_path / "x"), str(tmp_path / "y"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("30 problems: top-1 0.500, top-3 0.500; gap closed by the "
                               "top-1 50% [95% CI ")
    assert lines[1].startswith("30 problems: top-1 against the default: -0.100 [")
    assert lines[2].startswith("30 problems: top-3 against the full search by validation: "
                               "+0.100 [")


def test_the_full_search_s_lead_split_by_headroom(tmp_path: Path) -> None:
    # the full search from 0.3 to 0.6, the default 0.6: headroom 0.3 to 0; the proposer's
    # top-3 gives back half the headroom, so its shortfall grows with it
    ids = [f"{i:016x}" for i in range(40)]
    full = np.linspace(0.3, 0.6, 40)
    res = _rows(ids, full + 0.5 * (0.6 - full))
    rows = res.choices["method"] == "full_search"
    res.choices.loc[rows, "norm_error"] = res.choices.loc[rows, "problem_id"].map(
        dict(zip(ids, full, strict=True)))
    save_result(res, tmp_path / "h")
    done = run_script("induction_paired.py", "--a", str(tmp_path / "h"))
    assert done.returncode == 0, done.stderr
    line = done.stdout.splitlines()[-1]
    head = 0.6 - full
    more = head > np.median(head)
    assert line.startswith(f"40 problems: top-3 against the full search on the 20 problems "
                           f"with headroom (the default − the full search) above its median "
                           f"{(0.5 * head[more]).mean():+.3f}, on the other 20 "
                           f"{(0.5 * head[~more]).mean():+.3f}; Spearman of headroom and "
                           f"difference +1.00 (p ")



def test_groups_of_several_problems_get_a_line_of_their_own(tmp_path: Path) -> None:
    # ten groups: the first holds 21 problems where the proposer is at 0.3, the other nine
    # one each at 0.7; per problem the mean is (21 * 0.3 + 9 * 0.7) / 30 = 0.42, per group
    # (0.3 + 9 * 0.7) / 10 = 0.66: the default 0.6, the full search 0.4
    ids = [f"{i:016x}" for i in range(30)]
    res = _rows(ids, np.array([0.3] * 21 + [0.7] * 9))
    res.choices["group"] = res.choices["problem_id"].map(
        {pid: "g0" if i < 21 else f"g{i}" for i, pid in enumerate(ids)})
    save_result(res, tmp_path / "g")
    done = run_script("induction_paired.py", "--a", str(tmp_path / "g"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "gap closed by the top-1 90% [" in lines[0]  # (0.6 - 0.42) / 0.2, per problem
    grouped = lines[-1]
    assert grouped.startswith("30 problems: with each of the 10 groups as one unit (its "
                              "problems' mean): top-1 against knn-3 +0.160 [")
    assert "gap closed -30% [" in grouped  # (0.6 - 0.66) / 0.2
    # every group one problem: no such line
    save_result(_rows(ids, np.full(30, 0.5)), tmp_path / "one")
    done = run_script("induction_paired.py", "--a", str(tmp_path / "one"))
    assert "as one unit" not in done.stdout
