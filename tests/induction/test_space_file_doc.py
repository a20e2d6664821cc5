"""The README's example of a structure-space file is one `space show FILE` reads, and
gives what its comment says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aicf_induct.cli.main import main

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_space_file_is_read_by_space_show(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```yaml\n(# my_space\.yaml.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1, "README holds no `# my_space.yaml` example"
    path = tmp_path / "my_space.yaml"
    path.write_text(blocks[0])
    assert main(["space", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "4 axes, 24 points (sobol, n=8, seed=0): 8 candidates" in out.splitlines()[0]
