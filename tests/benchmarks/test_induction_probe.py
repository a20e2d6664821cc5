"""benchmarks/induction_probe.py: a probe is a short run of the default MLP on a seed none of
the corpus's runs use, its features are what the docstring says, and a problem without a
probe is named rather than silently given NaN features."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import induction_probe as ip


def test_a_probe_is_five_epochs_of_the_default_on_its_own_seed() -> None:
    got = ip.probe("wine")
    assert ip.PROBE_SEED not in range(8) and ip.PROBE_EPOCHS == 5
    assert set(ip.PROBE_COLUMNS) <= set(got) and got["problem"] == "wine"
    assert 0 <= got["f.probe.val_score"] <= 1  # accuracy
    assert got["f.probe.loss_ratio"] > 0 and got["f.probe.overfit"] > 0
    assert ip.probe("wine") == got  # deterministic
    reg = ip.probe("diabetes")
    assert -1 <= reg["f.probe.val_score"] <= 1  # R², clipped


def test_probes_join_by_name_and_a_missing_one_is_named(
        capsys: pytest.CaptureFixture[str]) -> None:
    meta = pd.DataFrame({"problem_id": ["a", "a", "b"], "problem": ["pa", "pa", "pb"]})
    probes = pd.DataFrame({"problem": ["pa", "pb"],
                           **{c: [1.0, 2.0] for c in ip.PROBE_COLUMNS}})
    out = ip.with_probes(meta, probes)
    assert list(out["f.probe.val_score"]) == [1.0, 1.0, 2.0]
    with pytest.raises(SystemExit) as stop:  # one line and status 2, as every bad input
        ip.with_probes(meta, probes.iloc[:1])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no probe for pb" in err and err.count("\n") == 1


def test_a_longer_short_run_records_each_rung_and_its_first_epochs_are_the_short_run() -> None:
    from aicf_induct.induction.space_io import parse_space

    keys = [c.key for c in parse_space("corpus32").candidates()[:2]]
    long = pd.DataFrame(ip.short_runs("wine", frozenset(keys), epochs=10))
    assert sorted(long["epochs"].unique()) == [5, 10] and set(long["candidate"]) == set(keys)
    short = pd.DataFrame(ip.short_runs("wine", frozenset(keys[:1])))
    first = long[(long["epochs"] == 5) & (long["candidate"] == keys[0])].iloc[0]
    # a constant schedule: a 10-epoch run's first 5 epochs are the 5-epoch run
    assert first["short_val_score"] == short["short_val_score"].iloc[0]
    assert first["short_val_loss"] == short["short_val_loss"].iloc[0]


def test_a_short_pick_is_the_best_validation_score_and_none_without_every_run() -> None:
    runs = pd.DataFrame({"problem": ["p"] * 3, "candidate": ["a", "b", "c"],
                         "short_val_score": [0.7, 0.9, 0.9],
                         "short_val_loss": [0.5, 0.4, 0.3]})
    assert ip.short_pick(runs, "p", ["a", "b"]) == "b"
    assert ip.short_pick(runs, "p", ["a", "b", "c"]) == "c"  # a tie: the lower loss
    assert ip.short_pick(runs, "p", ["a", "d"]) is None  # d has no run
