"""A space file naming a key twice is refused as the text form refuses it: YAML and JSON
loaders keep the last value silently, so `depth: [1, 2]` then `depth: [3]` swept depth 3
only."""

from __future__ import annotations

from pathlib import Path

import pytest

from aicf_induct.cli.main import main
from aicf_induct.errors import ConfigError
from aicf_induct.induction.space_io import parse_space


def _error(capsys: pytest.CaptureFixture[str], rc: int) -> str:
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1, (rc, err)
    return err


YAML_AXIS = "axes:\n  depth: [1, 2]\n  width: [8]\n  depth: [3]\n"
JSON_AXIS = '{"axes": {"depth": [1, 2], "width": [8], "depth": [3]}}'


@pytest.mark.parametrize("name,text,said", [
    ("s.yaml", YAML_AXIS, "axis 'depth' given twice (lines 2 and 4)"),
    ("s.yml", "axes: {depth: [1], depth: [2]}\n", "axis 'depth' given twice (line 1)"),
    ("s.json", JSON_AXIS, "axis 'depth' given twice"),
    ("s.yaml", "axes:\n  depth: [1]\nn: 2\nsample: random\nn: 3\n",
     "key 'n' given twice (lines 3 and 5)"),
    ("s.json", '{"axes": {"depth": [1]}, "seed": 1, "seed": 2}', "key 'seed' given twice"),
    ("s.yaml", "axes:\n  depth: [1]\naxes:\n  width: [8]\n",
     "key 'axes' given twice (lines 1 and 3)"),
])
def test_a_key_given_twice_in_a_space_file_is_refused(
        name: str, text: str, said: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / name
    path.write_text(text)
    err = _error(capsys, main(["space", "show", str(path)]))
    assert f"{path}: {said}" in err, err


def test_the_text_form_and_a_file_say_it_alike(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="axis 'depth' given twice"):
        parse_space("depth=1,2;width=8;depth=3")
    path = tmp_path / "s.yaml"
    path.write_text(YAML_AXIS)
    with pytest.raises(ConfigError, match="axis 'depth' given twice"):
        parse_space(str(path))


def test_files_without_repeats_load_as_before(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("axes:\n  depth: [1, 2]\n  width: [8, 16]\nsample: grid\n")
    assert parse_space(str(path)).space.size == 4
    # a YAML merge key (`<<`) whose keys the mapping overrides is YAML's own rule, no repeat
    path.write_text("axes:\n  <<: {depth: [1, 2], width: [8]}\n  width: [8, 16]\n")
    assert parse_space(str(path)).space.size == 4
    path = tmp_path / "s.json"
    path.write_text('{"axes": {"depth": [1, 2], "width": [8]}, "n": 2, "sample": "random"}')
    spec = parse_space(str(path))
    assert spec.space.size == 2 and spec.n == 2
