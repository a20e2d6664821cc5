"""Saved LOPO rows read back as they were written: a problem id of 16 hex digits that are
all decimal digits stays the text it is (read as a number, it would match no problem)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from induction_bench import load_result, save_result

from aicf_induct.induction.lopo import LopoResult


def test_saved_rows_come_back_with_their_ids_as_text(tmp_path: Path) -> None:
    ids = ["0123456789012345", "00ab34cd56ef7890"]
    choices = pd.DataFrame({"problem_id": ids, "problem": ["p", "q"], "group": ["1", "2"],
                            "k": [1, 1], "method": ["proposer", "default"],
                            "candidate": ["0000000000000007", "c"],
                            "norm_error": [0.25, 0.5], "regret": [0.01, 0.02]})
    calibration = pd.DataFrame({"problem_id": ids, "candidate": ["0000000000000007", "c"],
                                "inside": [True, False]})
    save_result(LopoResult(choices, calibration, 0.8), tmp_path)
    back = load_result(tmp_path)
    assert list(back.choices["problem_id"]) == ids
    assert list(back.choices["group"]) == ["1", "2"]
    assert list(back.choices["candidate"]) == ["0000000000000007", "c"]
    assert list(back.calibration["problem_id"]) == ids and back.level == 0.8
    # a run averaged over the splits of the seeds has no calibration: read back as none
    save_result(LopoResult(choices, pd.DataFrame(), 0.8), tmp_path / "partitions")
    back = load_result(tmp_path / "partitions")
    assert back.calibration.empty and list(back.choices["problem_id"]) == ids
