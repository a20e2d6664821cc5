"""The proposal form's body, read as the proposals route reads an upload (`api.upload`):
multipart/form-data spooled to a temporary directory as it arrives, counted against the upload
limit whatever Content-Length says, its file part written to a file of its own; or, for a form
sent without a file, urlencoded (small: read in memory). Both refuse a field given twice or
one the form does not have, with the route's messages. The text fields read before an error
are handed back (`kept`), so the form shown again holds what the user typed."""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import parse_qsl

from fastapi import Request
from fastapi.concurrency import run_in_threadpool

from api.middleware import BodyTooLarge
from api.upload import (
    FIELD_BYTES,
    FormError,
    boundary_of,
    file_name,
    named_parts,
    read_part,
    save_file,
    spool,
)

FILE = "file"  # the form's file input


@dataclass(frozen=True)
class Form:
    fields: dict[str, str]  # the text fields, stripped
    file: Path | None  # the uploaded table, when one was chosen
    filename: str  # what the answer calls it: the sender's name, without any directory


@contextlib.asynccontextmanager
async def read_form(request: Request, names: Collection[str], limit: int,
                    kept: dict[str, str] | None = None) -> AsyncIterator[Form]:
    """The form (fields of `names`) for the length of the block: FormError naming the field,
    BodyTooLarge (at once when Content-Length says so) past `limit` bytes. `kept` receives
    the text fields as they are read, those before an error too; past the limit, those the
    body held before the cut (the server reads no further: the file input comes last in
    propose.html so the others precede it)."""
    kept = {} if kept is None else kept
    content_type = request.headers.get("content-type", "")
    kind = content_type.split(";", 1)[0].strip().lower()
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        if kind == "multipart/form-data":
            kept.update(await _head_fields(request, content_type, names, limit))
        raise BodyTooLarge(limit)
    if kind == "application/x-www-form-urlencoded":
        yield await _urlencoded(request, names, kept)
    elif kind == "multipart/form-data":
        boundary = boundary_of(content_type)
        with tempfile.TemporaryDirectory(prefix="aicf-upload-") as tmp, \
                (Path(tmp) / "body").open("w+b") as body:
            try:
                await spool(request.stream(), body, limit)
            except BodyTooLarge:  # the fields before the cut: what the answer can keep
                body.seek(0)
                kept.update(await run_in_threadpool(_fields_in, body.read(_head_bytes(names)),
                                                    boundary, names))
                raise
            yield await run_in_threadpool(_multipart, body, boundary, names, Path(tmp), kept)
    else:
        raise FormError(f"expected a form (multipart/form-data), got '{kind or 'nothing'}'",
                        "header.Content-Type")


def _head_bytes(names: Collection[str]) -> int:
    """Enough of a multipart body's start to hold every text field before the file (each
    at most FIELD_BYTES, its headers a line or two)."""
    return (FIELD_BYTES + 1024) * len(names)


async def _head_fields(request: Request, content_type: str, names: Collection[str],
                       limit: int) -> dict[str, str]:
    """The text fields at the start of a multipart body refused for its declared length:
    its head read, the rest left unread (a piece of it that would pass `limit` is never
    handed over: `api.middleware.BodyLimit`; with a limit of megabytes, a browser's first
    pieces hold the fields)."""
    try:
        boundary = boundary_of(content_type)
    except FormError:
        return {}
    head, most = bytearray(), min(_head_bytes(names), limit)
    with contextlib.suppress(BodyTooLarge):
        async for chunk in request.stream():
            head += chunk
            if len(head) >= most:
                break
    return await run_in_threadpool(_fields_in, bytes(head[:most]), boundary, names)


def _fields_in(head: bytes, boundary: bytes, names: Collection[str]) -> dict[str, str]:
    """The text fields whole in `head`, the start of a multipart body cut short: the parts
    before its last boundary, parsed as a whole body (none when they cannot be)."""
    cut = head.rfind(b"\r\n--" + boundary)
    if cut < 0:
        return {}
    with tempfile.TemporaryFile() as f:
        f.write(head[:cut] + b"\r\n--" + boundary + b"--\r\n")
        out: dict[str, str] = {}
        with contextlib.suppress(FormError):
            for name, part in named_parts(f, boundary, names).items():
                if name != FILE and part.filename is None:
                    with contextlib.suppress(FormError):
                        out[name] = read_part(f, part).strip()
        return out


async def _urlencoded(request: Request, names: Collection[str], kept: dict[str, str]) -> Form:
    raw, most = io.BytesIO(), FIELD_BYTES * len(names)  # no file rides in one
    try:
        await spool(request.stream(), raw, most)
    except BodyTooLarge:
        raise FormError(f"a form without a file is at most {most} bytes") from None
    try:
        pairs = parse_qsl(raw.getvalue().decode("utf-8"), keep_blank_values=True)
    except UnicodeDecodeError:
        raise FormError("the form is not UTF-8") from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            raise FormError("given twice", f"body.{name}")
        if name not in names or name == FILE:
            raise FormError(f"unknown field (fields: {', '.join(names)})", f"body.{name}")
        fields[name] = kept[name] = value.strip()
    return Form(fields, None, "")


def _multipart(body: BinaryIO, boundary: bytes, names: Collection[str],
               tmp: Path, kept: dict[str, str]) -> Form:
    parts = named_parts(body, boundary, names)
    file = parts.pop(FILE, None)
    fields: dict[str, str] = {}
    for k, p in parts.items():  # before the file is saved: kept when it is refused
        fields[k] = kept[k] = read_part(body, p).strip()
    if file is None or (not file.filename and file.end == file.start):
        return Form(fields, None, "")  # a browser sends an empty part when none was chosen
    return Form(fields, save_file(body, file, tmp), file_name(file.filename))


def label(field: str) -> str:
    """A FormError's field as the form names its inputs: `body.top_k` -> `top_k`."""
    return "form" if field == "body" else field.removeprefix("body.")
