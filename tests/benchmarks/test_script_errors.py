"""benchmarks/script_errors.py: a benchmark script's bad input ends in one line and status 2,
and a fault of the script's own keeps its traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from script_errors import names_given, run_main


def test_a_missing_file_the_command_line_names_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    wh = tmp_path / "wh"
    monkeypatch.setattr(sys, "argv", ["x.py", "--warehouse", str(wh)])

    def main() -> int:
        open(wh / "runs" / "part-0.parquet")  # noqa: SIM115  (a part of the named folder)
        return 0

    with pytest.raises(SystemExit) as ended:
        run_main(main)
    assert ended.value.code == 2
    assert capsys.readouterr().err == f"error: no such file or folder: {wh}/runs/part-0.parquet\n"


def test_a_missing_file_of_the_script_itself_keeps_its_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file no argument names (one the script builds its own path to) is a fault in the
    script: one line would hide where it came from."""
    monkeypatch.setattr(sys, "argv", ["x.py", "--warehouse", str(tmp_path / "wh")])

    def main() -> int:
        open(tmp_path / "elsewhere.json")  # noqa: SIM115
        return 0

    with pytest.raises(FileNotFoundError):
        run_main(main)


@pytest.mark.parametrize(("filename", "argv", "named"), [
    ("a.parquet", ["a.parquet"], True),
    ("wh/runs/p.parquet", ["--warehouse", "wh"], True),
    ("wh/runs/p.parquet", ["--warehouse=wh"], True),
    ("./wh", ["wh"], True),
    ("whx/p.parquet", ["wh"], False),  # a sibling whose name starts alike is not inside
    ("b.parquet", ["a.parquet", "-v"], False),
    ("", ["a"], False),
    (None, ["a"], False),
])
def test_which_missing_files_the_command_line_named(
        filename: str | None, argv: list[str], named: bool, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert names_given(filename, argv) is named
