"""benchmarks/rule_replication.py: the planted rule replicates on every half; shuffled
scores mine none; the summary pools the halves."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from aicf_induct.induction.mining import Miner
from aicf_induct.induction.pack import build_pack, write_pack
from aicf_induct.induction.replication import replication_summary
from tests.benchmarks.scripts import run_script
from tests.induction.synthetic_meta import planted


def _pack(meta: pd.DataFrame, path: Path) -> Path:
    return write_pack(build_pack(meta, Miner(n_bootstrap=200).fit(meta), conformal_folds=0),
                      path, ["test"])


def test_the_planted_rule_replicates_on_every_half(tmp_path: Path) -> None:
    pack = _pack(planted(P=80), tmp_path / "p.parquet")
    done = run_script("rule_replication.py", "--pack", str(pack), "--splits", "3",
                      "--save", str(tmp_path / "rep.csv"))
    assert done.returncode == 0, done.stderr
    rep = pd.read_csv(tmp_path / "rep.csv")
    assert sorted(rep["split"].unique()) == [0, 1, 2]
    assert set(rep["trait"]) == {"norm.layernorm > 0"} and rep["replicated"].all()
    assert "100% replicate on the other half" in done.stdout
    assert "3 of 3 halves at 70% or more" in done.stdout


def test_shuffled_scores_mine_no_rule_on_any_half(tmp_path: Path) -> None:
    pack = _pack(planted(P=80, shuffle=True), tmp_path / "p.parquet")
    done = run_script("rule_replication.py", "--pack", str(pack), "--splits", "2")
    assert done.returncode == 0, done.stderr
    assert "No rule with q < 0.05 on any of the 2 random halves." in done.stdout
    assert "nan" not in done.stdout


def test_the_summary_pools_rules_and_ranges_halves() -> None:
    rep = pd.DataFrame({"split": [0, 0, 0, 0, 1, 1], "replicated": [1, 1, 1, 0, 0, 1]})
    s = replication_summary(rep.astype({"replicated": bool}))
    assert s["rules"] == 6 and s["splits"] == 2
    assert s["pooled"] == 4 / 6 and s["mean"] == (0.75 + 0.5) / 2
    assert (s["min"], s["max"]) == (0.5, 0.75)
