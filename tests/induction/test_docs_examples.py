"""docs/induction.md's Python examples run as written, in a directory whose `aicf_warehouse`
the page's own `corpus build` command made; and `Evaluation.as_dict()` is what `induce
evaluate --json` prints on it."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from aicf_induct.cli.main import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "induction.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding `aicf_warehouse`, built by the command the page gives for it."""
    command = re.search(r"`(aicf-induct corpus build [^`]*)`", DOC.read_text())
    assert command, "docs/induction.md gives no corpus build command for its examples"
    argv = shlex.split(" ".join(command.group(1).split()))[1:]
    work = tmp_path_factory.mktemp("docs")
    assert main([*argv, "--warehouse", str(work / "aicf_warehouse"), "--workers", "1",
                 "--quiet"]) == 0
    return work


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_the_python_examples_run_as_written(index: int, workdir: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(workdir)
    monkeypatch.delenv("AICF_WAREHOUSE", raising=False)
    exec(compile(_blocks()[index], f"docs/induction.md block {index + 1}", "exec"), {})


def test_evaluation_as_dict_is_what_evaluate_json_prints(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aicf_induct.induction import evaluate_corpus
    from aicf_induct.induction.corpus import corpus_meta
    from aicf_induct.induction.space import candidate_of

    root = workdir / "aicf_warehouse"
    default = candidate_of("mlp:depth=1,width=8").key  # the corpus has no default MLP
    capsys.readouterr()
    assert main(["induce", "evaluate", "--warehouse", str(root), "--ks", "1,3", "--default",
                 default, "--quiet", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    ev = evaluate_corpus(corpus_meta(root)[0], default=default, ks=(1, 3))
    assert ev.as_dict() == printed
    assert json.loads(json.dumps(ev.as_dict(), allow_nan=False)) == printed
