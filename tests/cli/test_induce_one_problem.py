"""`induce evaluate` and `mine` on a warehouse of one problem: each says what one problem
cannot give (leave-one-problem-out has none left to learn from; mining, rules of one
problem), not an error about something else or empty tables alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from aicf_induct.cli.main import main
from tests.induction.helpers import TINY_PROBLEMS, build_tiny_corpus


@pytest.fixture(scope="module")
def one(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_corpus(tmp_path_factory.mktemp("one") / "wh", TINY_PROBLEMS[:1])


def test_evaluate_on_one_problem_says_leave_one_out_has_none_to_learn_from(
        one: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    rc = main(["induce", "evaluate", "--warehouse", str(one), "--default",
               "mlp:depth=1,width=8,act=relu", "--quiet"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "", (out, err)
    # (after a note on k = 5 of 4 candidates)
    assert err.splitlines()[-1] == ("error: leave-one-problem-out needs at least 2 problems "
                                    "(groups); the corpus holds 1 problem in 1 group"), err


def test_mine_on_one_problem_notes_the_corpus_is_too_small(
        one: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    rc = main(["mine", "--warehouse", str(one), "--quiet"])
    _, err = capsys.readouterr()
    assert rc == 0, err
    assert err == ("note: 1 problem in 1 group: rules, correlations and neighbour distances "
                   "of so few problems mean little\n"), err
