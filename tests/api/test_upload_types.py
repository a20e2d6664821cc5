"""Uploads whose columns are of a type no model reads, through the real server's
POST /v1/proposals and the dashboard's /propose form (which read uploads the same way), and
`aicf-induct propose --dataset file:...` (the same loader): a Parquet date, time or duration
feature column is refused naming the column (as a timestamp is), a list, struct, map or
binary target naming the target, and a CSV header holding a NUL byte naming the column, in a
message of our own, not a pandas error."""

from __future__ import annotations

import datetime as dt
import html
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aicf_induct.cli.main import main
from tests.api.conftest import Server

N = 60
DAY = dt.date(2020, 1, 1)


def column(kind: str, distinct: bool) -> pa.Array:
    """A feature column of the Arrow type `kind`, every value distinct or of 3 values (a
    few values read as categories, many as free text: both were let through or misnamed)."""
    k = [i if distinct else i % 3 for i in range(N)]
    return {
        "timestamp": lambda: pa.array([dt.datetime(2020, 1, 1) + dt.timedelta(hours=i)
                                       for i in k], pa.timestamp("us")),
        "date32": lambda: pa.array([DAY + dt.timedelta(days=i) for i in k], pa.date32()),
        "date64": lambda: pa.array([DAY + dt.timedelta(days=i) for i in k], pa.date64()),
        "time32": lambda: pa.array([dt.time(i // 60, i % 60) for i in k], pa.time32("s")),
        "time64": lambda: pa.array([dt.time(0, 0, i) for i in k], pa.time64("us")),
        "duration": lambda: pa.array([dt.timedelta(seconds=i) for i in k], pa.duration("s")),
    }[kind]()


def table_file(tmp_path: Path, name: str, **columns: Any) -> Path:
    rng = np.random.default_rng(0)
    base = {"a": rng.normal(size=N), "b": rng.normal(size=N), "y": [i % 2 for i in range(N)]}
    path = tmp_path / name
    pq.write_table(pa.table({**base, **columns}), path)
    return path


def upload(server: Server, path: Path, **data: str) -> dict[str, Any]:
    with server.client() as c:
        r = c.post("/v1/proposals", files={"file": (path.name, path.read_bytes())},
                   data={"top": "1", **data})
    return {"status": r.status_code, "body": r.json(), "text": r.text}


def form_error(server: Server, path: Path, **data: str) -> str:
    """What the dashboard's proposal form says is wrong with the upload."""
    with server.client() as c:
        r = c.post("/propose", files={"file": (path.name, path.read_bytes())},
                   data={"top_k": "1", **data})
    m = re.search(r'id="form-error">(.*?)</div>', r.text)
    assert r.status_code == 422 and m, r.text[-2000:]
    return html.unescape(m.group(1))


def propose_cli_error(server: Server, dataset: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["propose", "--dataset", dataset, "--pack", str(server.pack), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


TIME_KINDS = ["timestamp", "date32", "date64", "time32", "time64", "duration"]


@pytest.mark.parametrize("distinct", [True, False])
@pytest.mark.parametrize("kind", TIME_KINDS)
def test_a_date_time_or_duration_feature_is_refused_naming_it(
        server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str,
        distinct: bool) -> None:
    path = table_file(tmp_path, f"{kind}.parquet", when=column(kind, distinct))
    why = "a duration column" if kind == "duration" else "a date/time column"
    got = upload(server, path, target="y")
    assert got["status"] == 422, got["text"]
    assert got["body"]["field"] == "body.file"
    assert got["body"]["detail"] == (f"{path.name}: column 'when' is {why}; leave it out with "
                                     "the form field drop=when")
    assert form_error(server, path, target="y") == f"file: {got['body']['detail']}"
    err = propose_cli_error(server, f"file:{path}?target=y", capsys)
    assert f"column 'when' is {why}; drop it with &drop=when" in err
    # and the advice works
    assert upload(server, path, target="y", drop="when")["status"] == 200


TARGETS = {
    "list": lambda: pa.array([[i % 2] for i in range(N)]),
    "struct": lambda: pa.array([{"k": i % 2} for i in range(N)]),
    "map": lambda: pa.array([[("k", i % 2)] for i in range(N)], pa.map_(pa.string(), pa.int64())),
    "binary": lambda: pa.array([b"x" if i % 2 else b"z" for i in range(N)], pa.binary()),
    "large_binary": lambda: pa.array([b"x" if i % 2 else b"z" for i in range(N)],
                                     pa.large_binary()),
}
WHY = {"list": "a nested column (list cells)", "struct": "a nested column (struct cells)",
       "map": "a nested column (list cells)", "binary": "a binary column (bytes cells)",
       "large_binary": "a binary column (bytes cells)"}


@pytest.mark.parametrize("task", [None, "classification"])
@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_a_nested_or_binary_target_is_refused_naming_it(
        server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str,
        task: str | None) -> None:
    path = table_file(tmp_path, f"t_{kind}.parquet", t=TARGETS[kind]())
    extra = {"task": task} if task else {}
    got = upload(server, path, target="t", **extra)
    assert got["status"] == 422, got["text"]
    assert got["body"]["field"] == "body.target"
    assert got["body"]["detail"] == (f"{path.name}: target 't' is {WHY[kind]}, not one "
                                     "number or label per row")
    assert form_error(server, path, target="t") == f"target: {got['body']['detail']}"
    err = propose_cli_error(server, f"file:{path}?target=t" + (f"&task={task}" if task else ""),
                            capsys)
    assert f"target 't' is {WHY[kind]}" in err


ROWS = b"".join(f"{i},{(i * 7) % 13},{i % 2}\n".encode() for i in range(N))


@pytest.mark.parametrize(("header", "position", "shown"), [
    (b"a,b\x00,y", 2, "'b\\x00'"),  # this one leaked pandas' KeyError
    (b"a,\x00,y", 2, "'\\x00'"),
    (b"\x00a,b,y", 1, "'\\x00a'"),
    (b"a,b,y\x00", 3, "'y\\x00'"),
    (b"a,b\x01c,y", 2, "'b\\x01c'"),
])
def test_a_header_with_a_nul_byte_is_refused_naming_the_column(
        server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str], header: bytes,
        position: int, shown: str) -> None:
    path = tmp_path / "nul.csv"
    path.write_bytes(header + b"\n" + ROWS)
    got = upload(server, path, target="y")
    assert got["status"] == 422, got["text"]
    detail = got["body"]["detail"]
    assert got["body"]["field"] == "body.file"
    assert detail == (f"nul.csv: column {position} of the header, {shown}, holds a control "
                      "character (a NUL byte, a line break): rename it")
    assert "Error" not in detail and "\x00" not in got["text"]
    assert form_error(server, path, target="y") == f"file: {detail}"
    err = propose_cli_error(server, f"file:{path}?target=y", capsys)
    assert f"column {position} of the header, {shown}, holds a control character" in err
