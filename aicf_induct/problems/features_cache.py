"""Problem meta-features kept on disk, under `cache.cache_dir()`: each process of a sweep,
each test worker and each `propose` of a table seen before reads them rather than
extracting them again (the landmarks' cross-validated fits take a second or two on a large
table). Keyed by the problem's split (`split_key`) and by what computes the features: the
features package's code and the versions of numpy, scipy and scikit-learn. The folders of
other code keys that no process has written to in `STALE_DAYS` days (an older version's)
are removed when this code writes its first entry. Deleting the folder only costs time."""

from __future__ import annotations

import functools
import hashlib
import shutil
import time
from pathlib import Path

import numpy as np

from aicf_induct.cache import cache_dir, read_json, write_json
from aicf_induct.problems.problem import Problem

FOLDER = "features"
STALE_DAYS = 30  # another code key's folder unwritten this long is an older version's


def split_key(problem: Problem) -> tuple[str, str]:
    """(problem id, digest of its training split and of the table facts the features read
    besides it, `problem.raw`). The id hashes the cleaned table only: the same data with a
    column dropped by `drop=` has the same id, and other facts."""
    train = problem.train
    h = hashlib.blake2b(digest_size=16)
    for a in (train.X, train.y):
        h.update(str(a.shape).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(repr(sorted(problem.raw.items())).encode())
    return problem.problem_id, h.hexdigest()


def cached_features(problem: Problem, key: tuple[str, str] | None = None) -> dict[str, float]:
    """`extract_features(problem)`, read from the disk cache when it holds them (a file
    that is absent, torn or of other values is computed again and rewritten). `key`: the
    problem's `split_key`, where the caller has it (it hashes the whole training split)."""
    from aicf_induct.problems import features  # looked up now: tests count its calls

    path = _path(key or split_key(problem))
    found = read_json(path)
    if isinstance(found, dict) and found and all(isinstance(v, float) for v in found.values()):
        return found
    computed = {str(k): float(v) for k, v in features.extract_features(problem).items()}
    _prune_stale_codes(path.parent.parent)  # the folder of every code key's folder
    write_json(path, computed)
    return computed


@functools.lru_cache(maxsize=8)
def _prune_stale_codes(root: Path) -> None:
    """Remove the folders under `root` of other code keys unwritten for `STALE_DAYS` days,
    once per process and root (a version in use, whose writes keep its folder's time
    recent, keeps its entries). What cannot be removed stays: it only costs disk."""
    now = time.time()
    try:
        folders = [f for f in root.iterdir()
                   if f.is_dir() and f.name != _code_key()]
    except OSError:
        return
    for folder in folders:
        try:
            stale = now - folder.stat().st_mtime > STALE_DAYS * 86_400
        except OSError:
            continue
        if stale:
            shutil.rmtree(folder, ignore_errors=True)


def _path(key: tuple[str, str]) -> Path:
    problem_id, digest = key
    name = hashlib.blake2b(f"{problem_id}\0{digest}".encode(), digest_size=16).hexdigest()
    return cache_dir() / FOLDER / _code_key() / f"{name}.json"


@functools.lru_cache(maxsize=1)
def _code_key() -> str:
    """What computes the features: their package's sources, the row sampler's and the
    numerical libraries' versions. A change to any of them is a folder of its own, so stale
    values are never read (an old one's folder goes once unwritten for `STALE_DAYS` days)."""
    import scipy
    import sklearn

    from aicf_induct.problems import features, splits

    h = hashlib.blake2b(digest_size=8)
    package = sorted(Path(features.__file__).parent.glob("*.py"))
    for source in [*package, Path(splits.__file__)]:
        h.update(source.name.encode())
        h.update(source.read_bytes())
    h.update(f"{np.__version__} {scipy.__version__} {sklearn.__version__}".encode())
    return h.hexdigest()
