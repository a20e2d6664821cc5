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


def test_probes_join_by_name_and_a_missing_one_is_named() -> None:
    meta = pd.DataFrame({"problem_id": ["a", "a", "b"], "problem": ["pa", "pa", "pb"]})
    probes = pd.DataFrame({"problem": ["pa", "pb"],
                           **{c: [1.0, 2.0] for c in ip.PROBE_COLUMNS}})
    out = ip.with_probes(meta, probes)
    assert list(out["f.probe.val_score"]) == [1.0, 1.0, 2.0]
    with pytest.raises(SystemExit, match="no probe for pb"):
        ip.with_probes(meta, probes.iloc[:1])
