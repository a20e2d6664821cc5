"""The project's one atomic file replacement (`aicf_induct.atomic_file`)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from aicf_induct.atomic_file import (
    TMP_PREFIX,
    TMP_SUFFIX,
    atomic_write,
    atomic_write_all,
    temp_path,
    write_output,
)


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


def _writer(text: str):  # type: ignore[no-untyped-def]
    return lambda tmp: tmp.write_text(text)


def test_files_written_together_are_all_new(tmp_path: Path) -> None:
    pack, prov = tmp_path / "p.parquet", tmp_path / "p.json"
    pack.write_text("old pack")
    atomic_write_all([(pack, _writer("new pack")), (prov, _writer("new prov"))])
    assert (pack.read_text(), prov.read_text()) == ("new pack", "new prov")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "p.parquet"]


@pytest.mark.parametrize("fail", ["rename", "write", "interrupt"])
def test_a_failure_among_files_written_together_leaves_them_all_old(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: str) -> None:
    """A pack's provenance was renamed into place before the pack: a failed rename (or an
    interrupt) between the two left the old pack beside the new provenance."""
    import os

    pack, prov, new = tmp_path / "p.parquet", tmp_path / "p.json", tmp_path / "n.txt"
    pack.write_text("old pack")
    prov.write_text("old prov")
    replace = os.replace

    def refused(src: object, dst: object) -> None:
        if Path(str(dst)) == prov and Path(str(src)).name.startswith(TMP_PREFIX):
            raise PermissionError(1, "Operation not permitted", str(src), None, str(dst))
        replace(src, dst)  # type: ignore[arg-type]

    def interrupted(tmp: Path) -> None:
        tmp.write_text("half")
        raise KeyboardInterrupt

    last = _writer("new prov")
    if fail == "rename":
        monkeypatch.setattr("aicf_induct.atomic_file.os.replace", refused)
    else:
        last = interrupted if fail == "interrupt" else lambda tmp: (_ for _ in ()).throw(
            OSError(28, "No space left on device"))
    with pytest.raises((OSError, KeyboardInterrupt)):
        atomic_write_all([(pack, _writer("new pack")), (new, _writer("new")), (prov, last)])
    assert (pack.read_text(), prov.read_text()) == ("old pack", "old prov")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "p.parquet"]


def test_a_device_or_a_pipe_is_written_in_place(tmp_path: Path) -> None:
    """`train --save-ir` and `ir import -o` renamed a temporary file over the path: a FIFO (as
    root, even /dev/full) became a regular file."""
    import os
    import stat

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_output(fifo, _writer("through the pipe"))
    reader.join(timeout=30)
    assert got == ["through the pipe"] and stat.S_ISFIFO(fifo.stat().st_mode)
    plain = tmp_path / "plain.txt"
    write_output(plain, _writer("a file"))
    assert plain.read_text() == "a file" and [p.name for p in tmp_path.iterdir()
                                              if p.name.startswith(TMP_PREFIX)] == []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))  # and together
    reader.start()
    atomic_write_all([(plain, _writer("replaced")), (fifo, _writer("piped too"))])
    reader.join(timeout=30)
    assert got[1:] == ["piped too"] and stat.S_ISFIFO(fifo.stat().st_mode)
    assert plain.read_text() == "replaced"
