"""Request bodies spooled to a temporary file, counted as they arrive, and multipart/form-data
split from that file (RFC 7578): a table upload never sits in memory whole, and nothing
trusts Content-Length. The proposals route and the dashboard's proposal form both read their
uploads here, so both have the same limits and the same messages.

`spooled` writes the body to a temporary directory (`spool` counts it); `named_parts` finds
the parts in it (offsets into the file, through mmap); `read_part` reads a text field;
`save_file` writes the file part to a file of its own.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import tempfile
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from aicf_induct.problems.files import COMPRESSED
from api.middleware import BodyTooLarge

MAX_PARTS = 16
MAX_HEADER_BYTES = 16 << 10  # one part's header block
FIELD_BYTES = 1024  # a text field's value (target, task, top) at most
SUFFIXES = {".csv": ".csv", ".tsv": ".tsv", ".txt": ".csv", ".parquet": ".parquet",
            ".pq": ".parquet"}
_BOUNDARY = re.compile(r"^[0-9A-Za-z'()+_,\-./:=? ]{1,70}$")  # RFC 2046 bchars


class FormError(Exception):
    """A multipart body that cannot be read; `field` names the part when there is one."""

    def __init__(self, message: str, field: str = "body") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Part:
    name: str
    filename: str | None
    start: int  # offsets of the content in the spooled body
    end: int


async def spool(chunks: AsyncIterator[bytes], dest: BinaryIO, limit: int) -> int:
    """Write the body to `dest`; BodyTooLarge (413) past `limit` bytes. Returns its size."""
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        dest.write(chunk)
    dest.flush()
    return size


@contextlib.asynccontextmanager
async def spooled(chunks: AsyncIterator[bytes],
                  limit: int) -> AsyncIterator[tuple[BinaryIO, Path]]:
    """The body written to a temporary directory as it arrives (BodyTooLarge past `limit`):
    the open file and the directory, both gone when the block ends."""
    with tempfile.TemporaryDirectory(prefix="aicf-upload-") as tmp, \
            (Path(tmp) / "body").open("w+b") as body:
        await spool(chunks, body, limit)
        yield body, Path(tmp)


def boundary_of(content_type: str) -> bytes:
    msg = Message()
    msg["content-type"] = content_type
    value = msg.get_param("boundary")
    if not isinstance(value, str) or not _BOUNDARY.match(value):
        raise FormError("multipart/form-data without a valid boundary parameter",
                        "header.Content-Type")
    return value.encode("ascii")


def form_parts(f: BinaryIO, boundary: bytes) -> list[Part]:
    """The parts of a multipart body in `f`, in order."""
    f.seek(0, 2)
    if f.tell() == 0:
        raise FormError("the multipart body is empty")
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        return _split(buf, b"--" + boundary)


def named_parts(f: BinaryIO, boundary: bytes, names: Collection[str]) -> dict[str, Part]:
    """The parts of a multipart body by name; FormError naming a part that is given twice or
    whose name is not one of `names`."""
    by_name: dict[str, Part] = {}
    for part in form_parts(f, boundary):
        if part.name in by_name:
            raise FormError("given twice", f"body.{part.name}")
        if part.name not in names:
            raise FormError(f"unknown field (fields: {', '.join(names)})", f"body.{part.name}")
        by_name[part.name] = part
    return by_name


def _split(buf: mmap.mmap, delim: bytes) -> list[Part]:
    if buf[:len(delim)] == delim:
        pos = 0
    else:  # a preamble comes first
        pos = buf.find(b"\r\n" + delim)
        if pos < 0:
            raise FormError("the body holds no multipart boundary")
        pos += 2
    parts: list[Part] = []
    while True:
        pos += len(delim)
        if buf[pos:pos + 2] == b"--":
            return parts
        eol = buf.find(b"\r\n", pos)
        if eol < 0 or buf[pos:eol].strip(b" \t"):
            raise FormError("malformed multipart boundary line")
        head_end = eol if buf[eol + 2:eol + 4] == b"\r\n" else buf.find(b"\r\n\r\n", eol + 2)
        if head_end < 0 or head_end - eol > MAX_HEADER_BYTES:
            raise FormError("a multipart part's headers do not end (or are too long)")
        start = head_end + 4
        end = buf.find(b"\r\n" + delim, start)
        if end < 0:
            raise FormError("the multipart body ends inside a part (no closing boundary)")
        parts.append(_part(buf[eol + 2:head_end], start, end))
        if len(parts) > MAX_PARTS:
            raise FormError(f"more than {MAX_PARTS} multipart parts")
        pos = end + 2


def _part(head: bytes, start: int, end: int) -> Part:
    msg = Message()
    for line in head.decode("utf-8", "replace").split("\r\n"):
        key, sep, value = line.partition(":")
        if not sep:
            raise FormError(f"malformed multipart header line {line[:80]!r}")
        msg[key.strip()] = value.strip()
    if msg.get_content_disposition() != "form-data":
        raise FormError("a multipart part is not form-data (Content-Disposition)")
    name = msg.get_param("name", header="content-disposition")
    if not isinstance(name, str) or not name:
        raise FormError("a multipart part has no name")
    filename = msg.get_filename()
    return Part(name, filename, start, end)


def read_part(f: BinaryIO, part: Part, limit: int = FIELD_BYTES) -> str:
    """A small text field's value (UTF-8)."""
    if part.end - part.start > limit:
        raise FormError(f"longer than {limit} bytes", f"body.{part.name}")
    f.seek(part.start)
    try:
        return f.read(part.end - part.start).decode("utf-8")
    except UnicodeDecodeError:
        raise FormError("not UTF-8 text", f"body.{part.name}") from None


def save_file(f: BinaryIO, part: Part, folder: Path) -> Path:
    """The file part written to `folder`/upload.SUFFIX: FormError when it is empty. Nothing of
    the sender's name reaches the path but one of the SUFFIXES."""
    if part.end == part.start:
        raise FormError("the uploaded file is empty", f"body.{part.name}")
    path = folder / f"upload{_suffix(f, part)}"
    with path.open("wb") as dest:
        copy_part(f, part, dest)
    return path


def check_cells(path: Path, limit: int) -> None:
    """FormError when a Parquet upload holds more than `limit` cells (rows × columns, from
    its footer, before anything is read): compressed, a 1.5 MB file held 3 million rows,
    4 GB of the server's memory once read. A CSV's cells are bounded by its bytes."""
    if path.suffix != ".parquet":
        return
    try:
        meta = pq.ParquetFile(path).metadata
    except (OSError, pa.ArrowException):
        return  # not Parquet after all: the reader says what it is
    rows, columns = meta.num_rows, meta.num_columns
    if rows * columns > limit:
        raise FormError(f"the table holds {rows:,} rows × {columns:,} columns, over the "
                        f"{limit:,} cells the service reads of an upload: send a sample of "
                        "its rows (or run `aicf-induct propose` on the whole file)",
                        "body.file")


def file_name(filename: str | None) -> str:
    """What an answer calls the upload: the sender's file name, without any directory."""
    base = os.path.basename((filename or "").replace("\\", "/"))
    clean = "".join(c for c in base if c.isprintable())[:100]
    return clean or "upload"


def _suffix(f: BinaryIO, part: Part) -> str:
    """The reader to use: from the file name's extension, else Parquet by its magic bytes,
    else CSV."""
    stem, ext = os.path.splitext((part.filename or "").lower())
    inner = os.path.splitext(stem)[1]
    if ext in COMPRESSED and inner in ("", ".csv", ".tsv", ".txt"):
        # a compressed text table (x.csv.gz; x.gz read as a CSV): the reader opens it by
        # both suffixes
        return SUFFIXES.get(inner, ".csv") + ext
    if ext in SUFFIXES:
        return SUFFIXES[ext]
    f.seek(part.start)
    return ".parquet" if f.read(4) == b"PAR1" else ".csv"


def copy_part(f: BinaryIO, part: Part, dest: BinaryIO, chunk: int = 1 << 20) -> None:
    f.seek(part.start)
    left = part.end - part.start
    while left > 0:
        data = f.read(min(chunk, left))
        dest.write(data)
        left -= len(data)
    dest.flush()


def column_list(text: str | None) -> tuple[str, ...]:
    """"a, b" -> ("a", "b"): a form's comma-separated column names."""
    return tuple(c.strip() for c in (text or "").split(",") if c.strip())
