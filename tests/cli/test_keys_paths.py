"""`keys create` and `serve` on paths that are wrong: a key file whose directory does not
exist, a key file that cannot be read or written. Each is one `error:` line naming the path
as given (exit 2), and nothing is left behind: no directory, no key file, no lock file. A
warehouse not made yet is made for the key, and said."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from aicf_induct.cli.main import main
from warehouse.keys import KEYS_FILE


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err.strip()


def _tree(path: Path) -> list[Path]:
    return sorted(path.rglob("*"))


def test_keys_create_says_when_it_makes_the_warehouse(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A warehouse not made yet is one `serve` serves (a service's keys come before its first
    run): made to hold the key file, but no longer silently, and with nothing but the key
    file in it. A typo whose parent is missing is still refused, nothing made."""
    monkeypatch.chdir(tmp_path)
    assert main(["keys", "create", "--warehouse", "typo/nowh", "--scope", "read"]) == 2
    assert "no warehouse at typo/nowh" in _error(capsys)
    assert _tree(tmp_path) == []
    assert main(["keys", "create", "--warehouse", "nowh", "--scope", "read"]) == 0
    got = capsys.readouterr()
    assert got.out.startswith("aicf_")
    assert got.err.startswith("note: no warehouse at nowh yet: made it, empty, to hold the "
                              "key file (`aicf-induct serve --warehouse nowh` serves it"), got.err
    assert [p.name for p in _tree(tmp_path / "nowh")] == [KEYS_FILE]  # and no lock file
    assert main(["keys", "create", "--warehouse", "nowh", "--scope", "read"]) == 0
    assert "note:" not in capsys.readouterr().err  # made now: nothing to say


def test_keys_create_refuses_a_key_file_in_a_missing_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["keys", "create", "--keys-file", "sub/x.json", "--scope", "read"]) == 2
    err = _error(capsys)
    assert err.startswith("error: --keys-file:") and "sub/x.json" in err, err
    assert _tree(tmp_path) == []
    assert main(["keys", "create", "--keys-file", "x.json", "--scope", "write"]) == 0
    assert _tree(tmp_path) == [tmp_path / "x.json"]  # no x.json.lock beside it


def test_a_create_that_fails_on_a_corrupt_key_file_leaves_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "keys.json"
    bad.write_text("{bad")
    assert main(["keys", "create", "--keys-file", str(bad), "--scope", "read"]) == 2
    assert f"key file '{bad}' is unreadable" in _error(capsys)
    assert _tree(tmp_path) == [bad] and bad.read_text() == "{bad"


def test_a_key_file_that_cannot_be_written_is_named_as_given(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "--keys-file", "/proc/k.json", "--scope", "read"]) == 2
    err = _error(capsys)
    assert "/proc/k.json" in err and ".lock" not in err and ".tmp" not in err, err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(*argv: str) -> subprocess.CompletedProcess[str]:
    """`aicf-induct serve`, which must refuse before uvicorn starts (a server that starts
    runs until the timeout kills it: the test fails)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "aicf_induct", "serve", "--port",
                           str(_free_port()), *argv], capture_output=True, text=True,
                          timeout=60, env=env)


@pytest.mark.parametrize("where", ["--keys-file", "the warehouse's"])
def test_serve_refuses_a_corrupt_key_file_as_keys_does(
        tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "wh"
    root.mkdir()
    bad = tmp_path / "keys.json" if where == "--keys-file" else root / KEYS_FILE
    bad.write_text('{"keys": [{"scope": "admin"}]}')
    argv = ["--warehouse", str(root), *(["--keys-file", str(bad)] if bad.parent != root
                                        else [])]
    assert main(["keys", "list", *argv]) == 2
    said = _error(capsys)
    assert str(bad) in said
    done = _serve(*argv)
    assert done.returncode == 2 and done.stderr.strip() == said, done.stderr
    assert "Uvicorn running" not in done.stderr


def test_serve_refuses_a_key_file_in_a_missing_directory(tmp_path: Path) -> None:
    done = _serve("--warehouse", str(tmp_path), "--keys-file", str(tmp_path / "sub" / "k.json"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: --keys-file:") and done.stderr.count("\n") == 1
    assert f"{tmp_path / 'sub' / 'k.json'}" in done.stderr
