"""Shared helpers of the sweep tests: reading a sweep's runs back from the warehouse."""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import warehouse

RUNS_SQL = """
SELECT json_extract_string(config, '$.sweep.problem_id'),
       json_extract_string(config, '$.sweep.candidate'), seed, status, error
FROM runs WHERE origin = 'sweep'
"""

ENDED = ("completed", "early_stopped", "failed", "timeout")

# the folder a pytest session's workers share (tests/conftest.py sets it)
SESSION_DIR = "AICF_TEST_SESSION_DIR"


def sweep_runs(root: Path) -> list[tuple[str, str, int, str, str | None]]:
    """(problem_id, candidate key, seed, status, error) of every sweep run, ended or not."""
    if not root.exists():
        return []
    return warehouse.with_retry(root, lambda c: c.execute(RUNS_SQL).fetchall())


def ended_triples(root: Path) -> Counter[tuple[str, str, int]]:
    return Counter((p, c, s) for p, c, s, status, _ in sweep_runs(root) if status in ENDED)


# A tiny corpus for the pack and CLI tests: 4 problems × 4 candidates × 2 seeds, 3 epochs,
# built by the real sweep through `aicf-induct corpus build`. 4 candidates: the miner needs a
# trait that at least 2 candidates have and 2 lack.
TINY_PROBLEMS = ("iris", "diabetes", "breast_cancer", "synthetic:moons?n=300&seed=1")
TINY_SPACE = "depth=1,2;act=relu,tanh;width=8"


# problems the tiny corpus does not hold (none grouped with one), swept the same way: a
# holdout set for the tiny pack
TINY_HELD_OUT = ("wine", "synthetic:circles?n=300&seed=2")


# sweeps built in this process, (problems, extra) -> the warehouse: a test gets a copy
_BUILT: dict[tuple[tuple[str, ...], tuple[str, ...]], Path] = {}


def build_tiny_corpus(root: Path, problems: Sequence[str] = TINY_PROBLEMS,
                      extra: Sequence[str] = ()) -> Path:
    """`problems` (default: the tiny corpus's) swept as the tiny corpus is (`extra`
    options overriding its own), into `root`. A new warehouse gets a copy of the sweep's,
    run once a test session (a test may write into it); one that exists is swept into."""
    from aicf_induct.cli.main import main

    def sweep(into: Path) -> None:
        assert main(["corpus", "build", "--problems", ",".join(problems), "--space",
                     TINY_SPACE, "--seeds", "2", "--epochs", "3", "--patience", "2",
                     "--workers", "1", "--warehouse", str(into), "--quiet", *extra]) == 0

    if root.exists():
        sweep(root)
        return root
    key = (tuple(problems), tuple(extra))
    if key not in _BUILT:
        _BUILT[key] = _built_once(key, sweep)
    shutil.copytree(_BUILT[key], root)
    return root


def _built_once(key: tuple[tuple[str, ...], tuple[str, ...]],
                sweep: Callable[[Path], None]) -> Path:
    """The sweep of `key`: in a pytest session, under the session's folder (tests/conftest.py)
    that xdist's workers share, built by the first worker to need it while the others wait;
    elsewhere in a temporary folder of this process's."""
    from aicf_induct.cache import one_writer

    session = os.environ.get(SESSION_DIR)
    if session is None:
        built = Path(tempfile.mkdtemp(prefix="aicf_tiny_corpus_")) / "wh"
        atexit.register(shutil.rmtree, built.parent, True)
        sweep(built)
        return built
    folder = Path(session) / f"tiny-corpus-{hashlib.sha256(repr(key).encode()).hexdigest()[:16]}"
    built, done = folder / "wh", folder / "done"
    if not done.exists():
        with one_writer(done):
            if not done.exists():
                shutil.rmtree(built, ignore_errors=True)  # a build stopped part-way
                sweep(built)
                done.touch()
    return built


# The tiny pack's conformal fits: one assignment of the groups to the folds, not the
# default five (the conformal fits are most of a tiny fit's time); a refit that must give
# the tiny pack's bytes passes these too
TINY_CONFORMAL = ("--conformal-repeats", "1")


def build_tiny_pack(corpus: Path, out: Path, bootstrap: int = 100) -> Path:
    """The knowledge pack of a tiny corpus (`build_tiny_corpus`), fitted by `aicf-induct
    induce fit` into `out`."""
    from aicf_induct.cli.main import main

    assert main(["induce", "fit", "--warehouse", str(corpus), "--min-problems", "2",
                 "--bootstrap", str(bootstrap), "-o", str(out), "--quiet",
                 *TINY_CONFORMAL]) == 0
    return out
