"""The learned rewrite proposer: a planted effect is proposed with an interval above 0, a
history without effects gives "no change", little data shrinks to the parent, tables pool
as one sample would, and the pack carries the table."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.specs import mlp_graph, parse_model_spec
from aicf_induct.induction.mining import Miner
from aicf_induct.induction.pack import META_KEY, Pack, build_pack, load_pack, write_pack
from aicf_induct.induction.rewrite_effects import RewriteEffects, RewriteQuery
from aicf_induct.induction.rewrite_history import COLUMNS, excluding
from aicf_induct.induction.rewrite_table import aggregate, combine_tables
from tests.induction.synthetic_meta import planted

GRAPH = mlp_graph(parse_model_spec("mlp:depth=2,width=8"), 5, 3)
PLATEAU_FIT = RewriteQuery(GRAPH, "plateau", 0.02, "classification", 300)


def history(effects: dict[str, float], n: int = 30, sd: float = 0.05, seed: int = 0,
            gap: float = 0.02, rows: float = 300) -> pd.DataFrame:
    """n decisions per arm at plateaus, effect ~ N(mean, sd)."""
    rng = np.random.default_rng(seed)
    out = []
    for arm, mean in effects.items():
        for i in range(n):
            out.append({c: None for c in COLUMNS} | {
                "run_id": f"r{i}", "problem_id": f"p{i % 5}", "problem": f"prob{i % 5}",
                "task": "classification", "step": 100, "trigger": "plateau",
                "trigger_kind": "plateau", "transform": arm,
                "options": json.dumps({"p": 0.2} if arm == "dropout" else {}),
                "gap": gap, "n_rows": rows, "effect": float(rng.normal(mean, sd)),
                "verdict": "none" if arm == "none" else "keep"})
    return pd.DataFrame(out, columns=list(COLUMNS))


def test_a_planted_effect_is_proposed_with_its_interval_above_zero() -> None:
    h = history({"none": 0.0, "widen": 0.15, "dropout": -0.1, "deepen": 0.0})
    ans = RewriteEffects().fit(h).propose(PLATEAU_FIT)
    assert ans.decision == "rewrite" and ans.history == 120
    top = ans.rewrites[0]
    assert top.transform == "widen" and top.site == "blocks.0.linear"
    assert 0 < top.low < top.expected_effect < top.high
    assert abs(top.expected_effect - 0.15) < 0.05
    assert top.evidence["n"] == {"transform": 30, "dynamics": 30, "problem": 30}
    assert top.evidence["baseline"].startswith("control arm")
    assert [p.transform for p in ans.rewrites] == ["widen"]  # deepen: no effect
    drop = next(p for p in ans.considered if p.transform == "dropout")
    assert drop.high < 0 and drop.options == {"p": 0.2}  # the options the history used


def test_no_effect_anywhere_gives_no_change() -> None:
    h = history({"none": 0.0, "widen": 0.0, "dropout": 0.0, "deepen": 0.0}, sd=0.1, seed=3)
    ans = RewriteEffects().fit(h).propose(PLATEAU_FIT)
    assert ans.decision == "none" and ans.rewrites == [] and ans.considered
    assert "no change" in ans.reason


def test_an_empty_history_says_so_and_proposes_nothing() -> None:
    ans = RewriteEffects.from_table(pd.DataFrame()).propose(PLATEAU_FIT)
    assert ans.decision == "none" and ans.history == 0 and "empty" in ans.reason


def test_a_cell_with_little_data_leans_on_its_parent() -> None:
    # overfitting cells: one observation of +0.9; the fitting regime: many of 0.1
    h = pd.concat([history({"widen": 0.1, "none": 0.0}, n=40),
                   history({"widen": 0.9}, n=1, gap=0.5)], ignore_index=True)
    e = RewriteEffects().fit(h)
    over = e.estimate("widen", RewriteQuery(GRAPH, "plateau", 0.5, "classification",
                                            300).condition())
    assert over.n == (41, 1, 1)
    assert 0.1 < over.mean < 0.5  # far from the lone +0.9
    assert e.estimate("prune", PLATEAU_FIT.condition()).mean == 0.0  # never seen: the prior


def test_blocked_and_inapplicable_transforms_are_not_considered() -> None:
    h = history({"none": 0.0, "widen": 0.15})
    q = RewriteQuery(GRAPH, "plateau", 0.02, "classification", 300, frozenset({"widen"}))
    ans = RewriteEffects().fit(h).propose(q)
    assert "widen" not in [p.transform for p in ans.considered] and ans.decision == "none"


def test_pooled_tables_equal_the_table_of_the_pooled_history() -> None:
    a, b = history({"none": 0.0, "widen": 0.1}, seed=1), history({"widen": 0.3}, n=7, seed=2)
    pooled = combine_tables(aggregate(a), aggregate(b))
    whole = aggregate(pd.concat([a, b], ignore_index=True))
    cols = ["level", "transform", "trigger_kind", "regime", "task", "size", "n"]
    pd.testing.assert_frame_equal(pooled[cols], whole[cols])
    np.testing.assert_allclose(pooled["mean"], whole["mean"])
    np.testing.assert_allclose(pooled["var"], whole["var"], atol=1e-12)


def test_the_excluded_problems_leave_the_history() -> None:
    h = history({"widen": 0.1}, n=10)
    kept = excluding(h, {"prob1", "p2"})
    assert set(kept["problem"]) == {"prob0", "prob3", "prob4"}


def _meta() -> tuple[pd.DataFrame, Miner]:
    meta = planted(P=12)
    return meta, Miner(min_problems=2, n_bootstrap=50).fit(meta)


def _pack(meta: pd.DataFrame, miner: Miner, rewrites: pd.DataFrame | None = None) -> Pack:
    """A pack of `meta` without the conformal fits (most of a build's time): these tests
    read its rewrite table, not its intervals."""
    return build_pack(meta, miner, rewrites=rewrites, conformal_folds=0)


def test_the_pack_carries_the_rewrite_table(tmp_path) -> None:
    meta, miner = _meta()
    table = aggregate(history({"none": 0.0, "widen": 0.15}))
    without = _pack(meta, miner)
    path = write_pack(_pack(meta, miner, table), tmp_path / "p.parquet", ["t"])
    back = load_pack(path)
    pd.testing.assert_frame_equal(back.rewrites, table, check_dtype=False)
    assert back.header["rewrite_decisions"] == 60
    assert back.rewrite_effects().propose(PLATEAU_FIT).rewrites[0].transform == "widen"
    old = load_pack(write_pack(without, tmp_path / "old.parquet", ["t"]))
    assert old.rewrites.empty and old.digest() == without.digest()
    assert old.rewrite_effects().propose(PLATEAU_FIT).history == 0


DAMAGES = {  # a row's values no table holds: each read back, then failed or misled later
    "a level that is no number": (lambda r: {"level": "not a number"}, ""),
    "a count below 1 (every estimate divided by zero at the run's first trigger)":
        (lambda r: {**r, "n": -5}, r": row 0 \(widen\): count n=-5"),
    "no variance": (lambda r: {k: v for k, v in r.items() if k != "var"},
                    r": row 0 \(widen\): mean .* or variance nan"),
    "a NaN variance": (lambda r: {**r, "var": float("nan")},
                       r": row 0 \(widen\): mean .* or variance nan"),
    "options that are no JSON object": (lambda r: {**r, "options": "{bad json"},
                                        r": row 0 \(widen\): options '\{bad json'"),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_rewrite_table_is_named(tmp_path, damage: str) -> None:
    import pyarrow.parquet as pq

    meta, miner = _meta()
    path = write_pack(_pack(meta, miner, aggregate(history({"widen": 0.1}))),
                      tmp_path / "p.parquet", ["t"])
    t = pq.read_table(path)
    header = json.loads(t.schema.metadata[META_KEY])
    change, names = DAMAGES[damage]
    header["rewrites"] = [change(r) for r in header["rewrites"]]
    pq.write_table(t.replace_schema_metadata({META_KEY: json.dumps(header).encode()}), path)
    with pytest.raises(ConfigError, match="rewrite table is damaged" + names):
        load_pack(path)


def test_effects_are_finite_numbers() -> None:
    ans = RewriteEffects().fit(history({"none": 0.0, "widen": 0.15})).propose(PLATEAU_FIT)
    for p in ans.considered:
        assert all(math.isfinite(v) for v in (p.expected_effect, p.low, p.high))


def test_the_shipped_pack_named_but_absent_means_no_pack(tmp_path, monkeypatch) -> None:
    from aicf_induct.induction import learned_effects as learned_mod
    from aicf_induct.induction.learned_effects import learned_effects

    monkeypatch.setattr(learned_mod, "DEFAULT_PACK", tmp_path / "not_built.parquet")
    effects, source = learned_effects(tmp_path / "not_built.parquet", None)
    assert source["pack"] is None and effects.history_ == 0
    with pytest.raises(ConfigError, match="no knowledge pack at"):
        learned_effects(tmp_path / "elsewhere.parquet", None)


def _history_frames() -> tuple[pd.DataFrame, ...]:
    """One run (guard 50): widen at 100 (kept), no change at 300, deepen at 400 (harm)."""
    def ev(step: int, kind: str, name: str, detail: dict, val: float | None = None) -> dict:
        return {"run_id": "r", "problem_id": "p", "problem": "prob", "task": "regression",
                "step": step, "kind": kind, "name": name, "detail": json.dumps(detail),
                "metrics_before": json.dumps({} if val is None else {"val_loss": val}),
                "at": step, "guard_steps": 50}
    events = pd.DataFrame([
        ev(100, "decision", "widen", {"trigger": "plateau"}, 1.0),
        ev(150, "guard", "widen", {"rewrite_step": 100, "val_before": 1.0, "val_after": 0.8,
                                   "verdict": "keep"}),
        ev(300, "decision", "none", {"trigger": "plateau"}, 0.9),
        ev(400, "decision", "deepen", {"trigger": "plateau"}, 0.85),
        ev(450, "guard", "deepen", {"rewrite_step": 400, "val_before": 0.85,
                                    "val_after": 0.95, "verdict": "harm"})])
    val_steps = [125, 150, 200, 250, 350, 400, 450, 500, 700, 900]
    val_loss = [0.9, 0.8, 0.7, 0.75, 0.6, 0.85, 0.9, 0.5, 0.4, 0.45]
    vals = pd.DataFrame({"run_id": "r", "step": val_steps, "value": val_loss})
    steps = pd.DataFrame(columns=["run_id", "step", "grad_norm", "update_ratio"])
    return events, vals, steps, pd.DataFrame({"problem_id": ["p"], "n_rows": [500.0]})


def test_effects_over_a_horizon_are_cut_at_the_next_rewrite() -> None:
    from aicf_induct.induction.rewrite_history import history_of

    guard = history_of(*_history_frames()).set_index("transform")
    assert guard["effect"].to_dict() == pytest.approx(
        {"widen": 0.2, "none": (0.9 - 0.6) / 0.9, "deepen": (0.85 - 0.95) / 0.85})
    long = history_of(*_history_frames(), horizon=400).set_index("transform")
    # widen: the best in (100, 400], cut at deepen; none: (300, 400] is under half of 400,
    # left out; deepen: the best in (400, 800]; the verdicts are the guard's
    assert long["effect"].to_dict() == pytest.approx({"widen": 0.4, "deepen": 0.45 / 0.85})
    assert long["verdict"].to_dict() == {"widen": "keep", "deepen": "harm"}


def test_a_decision_after_a_rollback_reads_the_path_it_was_made_on() -> None:
    """Steps 0-79 (trajectory 0), a rollback to 50, steps 50-119 (trajectory 1), a `none`
    decision at 60: its grad norm is of 50-59 on the replay (1.0), not of the dropped
    branch's rows of the same steps (100.0), and its outcome the replay's first validation
    loss at 60 + 10 (0.5), not the dropped branch's (2.0). A decision at 40, before the
    rollback, reads the first path: the dropped branch's loss at 50 is what came of it."""
    from aicf_induct.induction.rewrite_history import history_of

    def ev(step: int, kind: str, name: str, at: int, val: float | None = None) -> dict:
        return {"run_id": "r", "problem_id": "p", "problem": "prob", "task": "regression",
                "step": step, "kind": kind, "name": name,
                "detail": json.dumps({"trigger": "plateau"}),
                "metrics_before": json.dumps({} if val is None else {"val_loss": val}),
                "at": at, "guard_steps": 10}
    events = pd.DataFrame([ev(40, "decision", "none", 40, 1.0),
                           ev(50, "rollback", "requested", 80),
                           ev(60, "decision", "none", 91, 1.0)])
    steps = pd.DataFrame({"run_id": "r", "step": [*range(80), *range(50, 120)],
                          "grad_norm": [100.0] * 80 + [1.0] * 70,
                          "update_ratio": 1e-3, "trajectory": [0] * 80 + [1] * 70})
    vals = pd.DataFrame({"run_id": "r", "step": [50, 70, 70], "value": [0.9, 2.0, 0.5],
                         "trajectory": [0, 0, 1]})
    rows = pd.DataFrame({"problem_id": ["p"], "n_rows": [500.0]})
    got = history_of(events, vals, steps, rows).set_index("step")
    assert got.loc[60, "grad_norm"] == 1.0 and got.loc[40, "grad_norm"] == 100.0
    assert got.loc[60, "effect"] == pytest.approx(0.5) and got.loc[40, "effect"] == \
        pytest.approx(0.1)
    # frames without the column (an older warehouse) read as one path, as before
    old = history_of(events, vals.drop(columns="trajectory"), steps.drop(columns="trajectory"),
                     rows).set_index("step")
    assert old.loc[60, "grad_norm"] == pytest.approx((100.0 * 10 + 1.0 * 10) / 20)


@pytest.mark.parametrize("options", ["[1, 2]", '"p"', '{"nope": 1}', "not json"])
def test_options_no_transform_takes_fall_back_to_its_defaults(options: str) -> None:
    """A history the service ingested may hold any options (a remote client's decision
    events): a list, a string or an unknown keyword once raised TypeError through
    `POST /v1/rewrites`; the proposal now carries the transform's defaults."""
    h = history({"none": 0.0, "widen": 0.15})
    h.loc[h["transform"] == "widen", "options"] = options
    top = RewriteEffects().fit(h).propose(PLATEAU_FIT).rewrites[0]
    assert top.transform == "widen" and top.options == {}
