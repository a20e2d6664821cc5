"""What the commands write, and where: a failed write keeps the file that was there; an output
that cannot be written is refused before the work, in one line naming it; a refused command
leaves nothing behind (an IR file, a checkpoint folder, a warehouse in the working
directory); a pack's provenance that is not a JSON object is one line."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from aicf_induct.cli import options
from aicf_induct.cli.main import main
from aicf_induct.induction import pack as pack_mod

UNWRITABLE = "/proc"  # a folder no one may create a file in (root included)


@pytest.fixture(scope="module")
def wh(iris_run_warehouse: Path) -> Path:
    """A warehouse holding one small run (and no sweep: no corpus to fit)."""
    return iris_run_warehouse


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AICF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("AICF_WAREHOUSE", raising=False)
    monkeypatch.delenv(pack_mod.PACK_ENV, raising=False)


def _error(capsys: pytest.CaptureFixture[str], rc: int) -> str:
    """The one `error:` line a refused command printed (notes aside), after rc 2."""
    err = capsys.readouterr().err
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("note: ")]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), (rc, err)
    assert "Traceback" not in err
    return lines[0]


def _names(folder: Path) -> list[str]:
    """What `folder` holds, less the cache folder the tests point $AICF_CACHE_DIR at."""
    return sorted(p.name for p in folder.iterdir() if p.name != "cache")


# -- 1. sql -o ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["out.parquet", "out.json", "out.csv"])
def test_a_failed_sql_output_keeps_the_file_that_was_there(
        wh: Path, tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / name
    assert main(["sql", "--warehouse", str(wh), "-o", str(out), "SELECT 42 AS x"]) == 0
    before = out.read_bytes()
    # an interval has no Parquet type; a union none pandas (CSV) takes; JSON: two `a`s
    bad = {".parquet": "SELECT INTERVAL 1 DAY AS d",
           ".csv": "SELECT union_value(k := 1) AS u",
           ".json": "SELECT 1 AS a, 2 AS a"}[out.suffix]
    capsys.readouterr()
    _error(capsys, main(["sql", "--warehouse", str(wh), "-o", str(out), bad]))
    assert out.read_bytes() == before
    assert _names(tmp_path) == [name]  # no temporary file left


@pytest.mark.parametrize("name", ["dup.parquet", "dup.csv"])
def test_two_columns_of_one_name_are_refused_in_parquet_and_csv(
        wh: Path, tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / name
    line = _error(capsys, main(["sql", "--warehouse", str(wh), "-o", str(out),
                                "SELECT 1 AS a, 2 AS a, 3 AS b"]))
    assert "more than one column named 'a'" in line
    assert not out.exists()


def test_sql_output_that_cannot_be_written_is_one_line_naming_it(
        wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir.csv").mkdir()
    for out, words in ((f"{UNWRITABLE}/r.csv", "cannot write in the folder /proc"),
                       (str(tmp_path / "afile" / "r.csv"), "is a file, not a folder"),
                       (str(tmp_path / "adir.csv"), "is a folder, not a file"),
                       (str(tmp_path / "none" / "r.csv"), "does not exist")):
        line = _error(capsys, main(["runs", "--warehouse", str(wh), "-o", out]))
        assert out in line and words in line, line


# -- 2, 3. induce fit -o, checked before the fit -------------------------------------------
@pytest.mark.parametrize("name,words", [
    ("X.json", "a knowledge pack is Parquet: name it .parquet"),
    ("pk.txt", "a knowledge pack is Parquet: name it .parquet"),
    ("pk", "a knowledge pack is Parquet: name it .parquet"),
    ("adir.parquet", "is a folder, not a file"),
    ("afile/pk.parquet", "is a file, not a folder"),
    ("none/pk.parquet", "does not exist"),
    (f"{UNWRITABLE}/pk.parquet", "cannot write in the folder /proc"),
    ("prov_dir.parquet", "prov_dir.json: is a folder, not a file"),
])
def test_induce_fit_refuses_an_output_before_reading_the_corpus(
        wh: Path, tmp_path: Path, name: str, words: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`wh` holds no sweep: reading it as a corpus fails; the -o error comes first, so it is
    checked before the (minutes-long) fit, not after it. An -o whose provenance (NAME.json)
    would be the pack itself (X.json), or another file (pk.txt: pk.json), is refused."""
    (tmp_path / "adir.parquet").mkdir()
    (tmp_path / "afile").write_text("x")
    (tmp_path / "prov_dir.json").mkdir()
    (tmp_path / "pk.json").write_text('{"mine": 1}\n')
    out = name if name.startswith("/") else str(tmp_path / name)
    line = _error(capsys, main(["induce", "fit", "--warehouse", str(wh), "--quiet",
                                "-o", out]))
    assert "cannot write the knowledge pack to" in line and words in line, line
    assert (tmp_path / "pk.json").read_text() == '{"mine": 1}\n'
    assert _names(tmp_path) == [
        "adir.parquet", "afile", "pk.json", "prov_dir.json"]


def test_write_pack_refuses_a_path_its_provenance_would_overwrite(tmp_path: Path) -> None:
    from aicf_induct.errors import ConfigError

    pack = pack_mod.load_pack()
    for name in ("X.json", "p.txt"):
        with pytest.raises(ConfigError, match=r"name it \.parquet"):
            pack_mod.write_pack(pack, tmp_path / name, ["t"])
    assert _names(tmp_path) == []


# -- 4. a provenance that is not a JSON object ---------------------------------------------
@pytest.fixture
def listed_pack(tmp_path: Path) -> Path:
    kp = tmp_path / "kp.parquet"
    shutil.copyfile(pack_mod.DEFAULT_PACK, kp)
    (tmp_path / "kp.json").write_text("[]\n")
    return kp


@pytest.mark.parametrize("argv", [
    ["propose", "--dataset", "iris"],
    ["train", "--dataset", "iris", "--from-proposal", "--epochs", "1", "--no-log"],
    ["adapt", "--dataset", "iris", "--from-proposal", "--steps", "10", "--no-log"],
    ["induce", "fit", "--quiet"],
])
def test_a_provenance_that_is_not_an_object_is_one_line(
        listed_pack: Path, tmp_path: Path, argv: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    extra = ["-o", str(tmp_path / "new.parquet")] if argv[0] == "induce" else []
    line = _error(capsys, main([*argv, "--pack", str(listed_pack), *extra]))
    assert line == (f"error: {tmp_path / 'kp.json'}: the pack's provenance is not a JSON "
                    "object")


# -- 5. --ranks ---------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["train", "--epochs", "2"], ["adapt", "--steps", "10"]])
def test_ranks_past_the_machine_are_refused_by_the_parser(
        command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    cap = options.max_ranks()
    line = _error(capsys, main([command[0], "--dataset", "iris", *command[1:], "--no-log",
                                "--ranks", str(cap + 1)]))
    assert f"argument --ranks: at most {cap} on this machine" in line, line


def test_the_cap_is_the_cpu_count_or_the_floor() -> None:
    assert options.max_ranks() == max(len(os.sched_getaffinity(0)), options.RANKS_FLOOR)


# -- 6. a run refused at its start leaves nothing behind -----------------------------------
def test_save_ir_is_not_written_when_the_warehouse_refuses_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ir = tmp_path / "m.json"
    line = _error(capsys, main(["train", "--dataset", "iris", "--epochs", "1", "--quiet",
                                "--save-ir", str(ir), "--warehouse", f"{UNWRITABLE}/wh"]))
    assert "/proc/wh" in line
    assert not ir.exists()
    line = _error(capsys, main(["train", "--dataset", "iris", "--epochs", "1", "--quiet",
                                "--model", "mlp:depth=1,width=4,norm=batchnorm",
                                "--batch-size", "1", "--save-ir", str(ir), "--no-log"]))
    assert "batchnorm" in line
    assert not ir.exists()
    assert main(["train", "--dataset", "iris", "--epochs", "1", "--quiet", "--save-ir",
                 str(ir), "--no-log"]) == 0
    assert ir.is_file()


def test_adapt_removes_the_checkpoint_folder_it_made_for_a_run_that_did_not_start(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "kept").mkdir()
    for ck in (tmp_path / "newck", tmp_path / "a" / "b" / "ck", tmp_path / "kept"):
        line = _error(capsys, main(["adapt", "--dataset", "iris", "--steps", "10", "--quiet",
                                    "--checkpoint-dir", str(ck),
                                    "--warehouse", f"{UNWRITABLE}/wh"]))
        assert "/proc/wh" in line
    assert _names(tmp_path) == ["kept"]


# -- 7. an empty --warehouse --------------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["train", "--dataset", "iris", "--epochs", "1", "--quiet"],
    ["adapt", "--dataset", "iris", "--steps", "10", "--quiet"],
    ["sql", "SELECT 1"], ["runs"], ["report", "leaderboard"], ["warehouse", "check"],
    ["induce", "fit", "-o", "p.parquet"], ["induce", "evaluate"], ["mine"],
    ["corpus", "meta", "-o", "m.parquet"], ["corpus", "build", "--problems", "iris"],
    ["sweep", "--problems", "iris"], ["plot", "run", "latest", "-o", "r.png"],
    ["push", "r", "--to", "http://127.0.0.1:9"],
])
def test_an_empty_warehouse_is_refused(argv: list[str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    line = _error(capsys, main([*argv, "--warehouse", ""]))
    assert "argument --warehouse: empty directory name" in line, line
    assert _names(tmp_path) == []


def test_an_empty_history_warehouse_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, main(["induce", "fit", "--history", "", "-o", "p.parquet"]))
    assert "argument --history: empty directory name" in line


# -- 8. corpus meta -o ----------------------------------------------------------------------
def test_corpus_meta_names_the_output_it_cannot_write(
        wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`wh` holds no sweep: the -o error comes first, before the corpus is read."""
    line = _error(capsys, main(["corpus", "meta", "-o", f"{UNWRITABLE}/meta.parquet",
                                "--warehouse", str(wh)]))
    assert f"{UNWRITABLE}/meta.parquet" in line and "None" not in line, line
    assert "cannot write in the folder /proc" in line


def test_a_parquet_output_is_readable(wh: Path, tmp_path: Path) -> None:
    out = tmp_path / "ok.parquet"
    assert main(["sql", "--warehouse", str(wh), "-o", str(out), "SELECT 1 AS a, 2 AS b"]) == 0
    assert pq.read_table(out).to_pydict() == {"a": [1], "b": [2]}


def test_a_table_on_stdout_lays_out_its_first_rows_and_says_so(
        wh: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    # laid out whole, 2.3 million rows took 80 s and 4.6 GB before the first line showed
    from aicf_induct.cli import warehouse_cmds

    monkeypatch.setattr(warehouse_cmds, "TABLE_ROWS", 3)
    query = ["sql", "--warehouse", str(wh), "SELECT range AS n FROM range(5)"]
    assert main(query) == 0
    out, err = capsys.readouterr()
    assert out.split() == ["n", "0", "1", "2"]
    assert err == "note: the first 3 of 5 rows; --format csv (or -o FILE) gives them all\n"
    assert main([*query, "--format", "csv"]) == 0
    assert capsys.readouterr().out.split() == ["n", "0", "1", "2", "3", "4"]
    assert main([*query, "-o", str(tmp_path / "all.txt"), "--format", "table"]) == 0
    assert (tmp_path / "all.txt").read_text().split() == ["n", "0", "1", "2", "3", "4"]
