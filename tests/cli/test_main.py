"""The top-level command line: each command's module is the one that registers it, and a
command line imports only the module it needs (so `propose` answers fast)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from aicf_induct.cli.main import COMMAND_MODULES, Parser, main, modules_for

REPO = Path(__file__).resolve().parents[2]


def test_each_module_registers_exactly_the_commands_listed_for_it() -> None:
    for module, names in COMMAND_MODULES.items():
        sub = Parser(prog="t").add_subparsers(dest="command")
        importlib.import_module(module).register(sub)
        assert tuple(sub.choices) == names, module


def test_a_command_line_needs_its_module_only_or_all_for_help() -> None:
    assert modules_for(["propose", "--dataset", "wine"]) == ["aicf_induct.cli.induce"]
    assert modules_for(["runs", "--limit", "3"]) == ["aicf_induct.cli.warehouse_cmds"]
    assert modules_for([]) == list(COMMAND_MODULES)
    assert modules_for(["--help"]) == list(COMMAND_MODULES)
    assert modules_for(["frobnicate"]) == list(COMMAND_MODULES)


def test_help_lists_every_command(capsys) -> None:
    with pytest.raises(SystemExit, match="0"):
        main(["--help"])
    out = capsys.readouterr().out
    for names in COMMAND_MODULES.values():
        for name in names:
            assert f"    {name}" in out, name


def test_unknown_command_names_it_with_the_full_list(capsys) -> None:
    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'frobnicate'" in err and "propose" in err


def _loaded(argv: list[str], names: tuple[str, ...]) -> list[str]:
    """Which of `names` (modules, or packages by their top name) a fresh interpreter has
    imported once `main(argv)` has parsed its command line."""
    probe = ("import contextlib, io, json, sys\n"
             "from aicf_induct.cli.main import main\n"
             "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
             f"    main({argv!r})\n"
             f"print(json.dumps(sorted({{n for n in {names!r} for m in sys.modules"
             " if m == n or m.startswith(n + '.')})))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


@pytest.mark.parametrize("command", [None, *(n for names in COMMAND_MODULES.values()
                                             for n in names)])
def test_help_imports_no_scikit_learn_or_scipy(command: str | None) -> None:
    """`--help`, of the whole tool or of one command, builds parsers: what a command needs
    to run (the feature extractors, the statistics, the kernels' special functions) loads
    when it runs (about 1 s of a 1.5 s `aicf-induct --help` when they loaded); the options
    read `problems.splits`' seed bound, and the IR's activations use scipy only when they
    run. The warehouse layer's DuckDB, pyarrow and pandas still load with the commands that
    read it."""
    argv = ["--help"] if command is None else [command, "--help"]
    assert _loaded(argv, ("sklearn", "scipy")) == []


def test_propose_does_not_import_the_warehouse_or_the_trainer() -> None:
    assert _loaded(["propose", "--help"], ("warehouse", "duckdb", "aicf_induct.runtime.trainer",
                                          "aicf_induct.cli.from_proposal")) == []


def _cli(*argv: str, limit_kib: int | None = None) -> subprocess.Popen[str]:
    """`aicf-induct ARGV` as a terminal starts it (SIGINT at its default, a group of its own),
    under a file-size limit of `limit_kib` KiB where given."""
    import os

    from tests.signals import default_sigint

    def start() -> None:
        default_sigint()
        if limit_kib is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_kib << 10,) * 2)

    return subprocess.Popen([sys.executable, "-m", "aicf_induct", *argv], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)},
                            start_new_session=True, preexec_fn=start)




def _wait_for(path: Path, pattern: str, proc: subprocess.Popen[str]) -> None:
    import time

    deadline = time.monotonic() + 60
    while not list(path.glob(pattern)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"no {pattern} in {path}"
        time.sleep(0.05)


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_a_signal_during_a_query_or_a_write_is_interrupted_and_leaves_no_temp(
        tmp_path: Path, iris_run_warehouse: Path, signum: str) -> None:
    """Ctrl-C during a query was a traceback ending in DuckDB's "RuntimeError: Query
    interrupted"; SIGTERM (kill, timeout, a scheduler) killed `sql -o` silently, leaving its
    temporary file in the user's folder."""
    import signal
    import time

    out = tmp_path / "out" / "big.csv"
    out.parent.mkdir()
    for query, started in (("select count(*) from range(100000000000)", None),  # seconds
                           ("select range, range * 2 as twice from range(3000000)", ".tmp-*")):
        proc = _cli("sql", "--warehouse", str(iris_run_warehouse), "-o", str(out), query)
        if started is None:
            time.sleep(3)  # the imports done, the query running
        else:
            _wait_for(out.parent, started, proc)  # the output being written
        proc.send_signal(getattr(signal, signum))
        _, err = proc.communicate(timeout=60)
        assert (proc.returncode, err.strip().splitlines()[-1:]) == (130, ["interrupted"]), err
        assert "Traceback" not in err
        assert list(out.parent.iterdir()) == []


def test_a_write_past_the_file_size_limit_is_one_line(tmp_path: Path) -> None:
    """A checkpoint past `ulimit -f` (or a full disk) raised an OSError naming no file, which
    the CLI passed on as a bug: a traceback."""
    proc = _cli("adapt", "--dataset", "digits", "--steps", "300", "--checkpoint-steps", "100",
                "--backend", "numpy", "--checkpoint-dir", str(tmp_path / "ck"), "--no-log",
                "--quiet", limit_kib=20)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err
    assert err.strip().splitlines()[-1] == (
        "error: a write failed: a file reached the size limit of this process (ulimit -f) or "
        "of the file system (File too large)"), err
    assert "Traceback" not in err
