"""warehouse/README.md's Python example runs as written, on a warehouse holding an iris run,
and the module's `connect` refuses what the README says it refuses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.warehouse.conftest import log_run, problem
from warehouse import WarehouseError, WarehouseRecorder, connect

README = Path(__file__).resolve().parents[2] / "warehouse" / "README.md"


def test_the_readme_example_runs_as_written(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "wh"
    rec = WarehouseRecorder(root)
    iris = problem("p-iris")
    log_run(rec, "r1", type(iris)(**{**iris.__dict__, "name": "iris"}), 0.9, "fp", {})
    rec.close()
    monkeypatch.setenv("AICF_WAREHOUSE", str(root))
    (block,) = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    scope: dict[str, object] = {}
    exec(compile(block, "warehouse/README.md", "exec"), scope)
    assert scope["conn"].execute("SELECT count(*) FROM runs").fetchone() == (1,)  # type: ignore[attr-defined]


def test_connect_refuses_a_typo_and_a_foreign_directory_unless_missing_is_ok(
        tmp_path: Path) -> None:
    with pytest.raises(WarehouseError, match=r"no warehouse at .*typo"):
        connect(tmp_path / "typo")
    assert connect(tmp_path / "typo", missing_ok=True).execute(
        "SELECT count(*) FROM runs").fetchone() == (0,)
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "src").mkdir()
    with pytest.raises(WarehouseError, match="is not a warehouse"):
        connect(tmp_path / "repo")
    (tmp_path / "empty").mkdir()  # a warehouse nothing was written to yet
    assert connect(tmp_path / "empty").execute("SELECT count(*) FROM runs").fetchone() == (0,)
    assert not (tmp_path / "typo").exists()
