"""The project's one atomic file replacement (`aicf_induct.atomic_file`)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from aicf_induct.atomic_file import TMP_PREFIX, TMP_SUFFIX, atomic_write, temp_path


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    final = tmp_path / "pack.json"
    final.write_text("old")

    def half(tmp: Path) -> None:
        tmp.write_text("ne")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        atomic_write(final, half)
    assert final.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["pack.json"]


@pytest.mark.parametrize("durable", [True, False])
def test_the_new_content_replaces_the_old(tmp_path: Path, durable: bool) -> None:
    final = tmp_path / "x.parquet"
    final.write_text("old")
    atomic_write(final, lambda p: p.write_text("new"), durable=durable)
    assert final.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["x.parquet"]


def test_temporary_names_are_hidden_from_globs_and_unique_per_call(tmp_path: Path) -> None:
    final = tmp_path / "part-1.parquet"
    names = {temp_path(final).name for _ in range(100)}
    assert len(names) == 100
    assert all(n.startswith(TMP_PREFIX) and n.endswith(TMP_SUFFIX) for n in names)


def test_concurrent_writers_of_one_file_never_write_into_each_others_temporary(
        tmp_path: Path) -> None:
    # with one shared temporary name, a writer could rename the other's half-written file
    final = tmp_path / "lease.json"
    errors: list[BaseException] = []

    def writer(text: str) -> None:
        try:
            for _ in range(50):
                atomic_write(final, lambda p: p.write_text(text * 1000), durable=False)
                assert final.read_text() in ("a" * 1000, "b" * 1000)
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(c,)) for c in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [p.name for p in tmp_path.iterdir()] == ["lease.json"]
