"""The meta-features' disk cache: a process reads what another extracted, a split or a code
of its own gets its own entry, and a torn file is computed again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aicf_induct.problems import features, features_cache, load_problem
from aicf_induct.problems.features_cache import cached_features

REPO = Path(__file__).resolve().parents[2]


def test_each_split_is_extracted_once_and_read_back_as_it_was(extractions: list[int]) -> None:
    seed0, seed1 = load_problem("iris", seed=0), load_problem("iris", seed=1)
    first = cached_features(seed0)
    assert first == {k: float(v) for k, v in features.extract_features(seed0).items()}
    extractions.clear()
    assert cached_features(load_problem("iris", seed=0)) == first  # the same split, loaded again
    assert extractions == []
    assert cached_features(seed1) != first and extractions == [1]  # another split, own entry


def test_another_process_reads_what_this_one_extracted(extractions: list[int]) -> None:
    mine = cached_features(load_problem("wine", seed=0))
    # the other process cannot extract: only the cache can answer it
    code = ("import json\n"
            "from aicf_induct.problems import features, load_problem\n"
            "from aicf_induct.problems.features_cache import cached_features\n"
            "def refuse(*a, **k): raise AssertionError('extracted again')\n"
            "features.extract_features = refuse\n"
            "print(json.dumps(cached_features(load_problem('wine', seed=0))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == mine


def test_a_torn_entry_or_other_code_is_extracted_again(extractions: list[int],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    iris = load_problem("iris", seed=0)
    first = cached_features(iris)
    entry = features_cache._path(features_cache.split_key(iris))
    entry.write_text(entry.read_text()[:40])  # a file cut short
    assert cached_features(iris) == first and extractions == [0, 0]
    assert cached_features(iris) == first and extractions == [0, 0]  # rewritten whole
    monkeypatch.setattr(features_cache, "_code_key", lambda: "other-code")
    assert cached_features(iris) == first and extractions == [0, 0, 0]
    assert features_cache._path(features_cache.split_key(iris)) != entry


def test_an_older_codes_folder_goes_when_this_code_first_writes(
        extractions: list[int], tmp_path: Path) -> None:
    root = tmp_path / "cache" / features_cache.FOLDER
    old, recent = root / "old-code", root / "code-in-use"
    for folder in (old, recent):
        folder.mkdir(parents=True)
        (folder / "entry.json").write_text("{}")
    month_ago = time.time() - (features_cache.STALE_DAYS + 1) * 86_400
    os.utime(old, (month_ago, month_ago))
    cached_features(load_problem("iris", seed=0))
    assert sorted(f.name for f in root.iterdir()) == sorted(
        [features_cache._code_key(), "code-in-use"])
    # a read from the cache writes nothing, and so removes nothing
    os.utime(recent, (month_ago, month_ago))
    features_cache._prune_stale_codes.cache_clear()
    cached_features(load_problem("iris", seed=0))
    assert recent.is_dir() and extractions == [0]
