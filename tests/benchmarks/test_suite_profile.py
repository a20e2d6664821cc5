"""benchmarks/suite_profile.py: a py-spy raw profile summarised by category, by the library
an import spends its time in, and by the processes multiprocessing started."""

from __future__ import annotations

from pathlib import Path

from tests.benchmarks.scripts import run_script

WORKER = 'process 10:"python -u -c import sys"'
CHILD = 'process 11:"python -B -c from multiprocessing.spawn import spawn_main"'
RAW = "\n".join([
    # a test importing the project, which imports sklearn: sklearn's time
    f"{WORKER};<module> (<string>:1);_find_and_load (<frozen importlib._bootstrap>:1165);"
    "<module> (aicf_induct/problems/preprocess.py:30);_find_and_load (<frozen x>:1);"
    "<module> (sklearn/__init__.py:5);<module> (scipy/stats/__init__.py:1) 6",
    # a spawned pool worker fitting gradient boosting
    f"{CHILD};spawn_main (multiprocessing/spawn.py:120);"
    "fit (sklearn/ensemble/_hist_gradient_boosting/gradient_boosting.py:393) 3",
    # a sweep worker forked by a forkserver: its command line is the server's
    'process 13:"python -B -c from multiprocessing.forkserver import main; main(3, 4)";'
    "train_step (aicf_induct/runtime/executor.py:50) 1",
    # a warehouse query, and a plain step
    f"{WORKER};connect (warehouse/catalog.py:10) 2",
    f"{WORKER};train_step (aicf_induct/runtime/executor.py:50) 1",
    # a command line broken over lines: skipped
    'process 12:"python -c import x',
    'print(1)";<module> (<string>:1) not-a-count',
]) + "\n"


def test_the_summary_counts_each_stack_once_by_category_library_and_process(
        tmp_path: Path) -> None:
    raw = tmp_path / "suite.raw"
    raw.write_text(RAW)
    done = run_script("suite_profile.py", str(raw))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("13 samples\n")
    for row in ("| importing modules | 6 | 46.2 % |", "| gradient boosting fits | 3 | 23.1 % |",
                "| warehouse (DuckDB, warehouse/) | 2 | 15.4 % |", "| the rest | 2 | 15.4 % |",
                "| sklearn | 6 | 46.2 % |", "| multiprocessing children | 4 | 30.8 % |",
                "| other processes | 9 | 69.2 % |"):
        assert row in out, out
    assert "| scipy |" not in out  # inside sklearn's import: sklearn's time


def test_a_file_without_stacks_is_a_one_line_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.raw"
    empty.write_text("not a profile\n")
    for path, says in ((empty, "holds no py-spy raw stacks"),
                       (tmp_path / "none.raw", "No such file")):
        done = run_script("suite_profile.py", str(path))
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.startswith(f"error: {path}") and says in done.stderr
        assert done.stderr.count("\n") == 1
