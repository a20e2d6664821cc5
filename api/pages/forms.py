"""The proposal form's body, read as the proposals route reads an upload (`api.upload`):
multipart/form-data spooled to a temporary directory as it arrives, counted against the upload
limit whatever Content-Length says, its file part written to a file of its own; or, for a form
sent without a file, urlencoded (small: read in memory). Both refuse a field given twice or
one the form does not have, with the route's messages."""

from __future__ import annotations

import contextlib
import io
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
    spooled,
)

FILE = "file"  # the form's file input


@dataclass(frozen=True)
class Form:
    fields: dict[str, str]  # the text fields, stripped
    file: Path | None  # the uploaded table, when one was chosen
    filename: str  # what the answer calls it: the sender's name, without any directory


@contextlib.asynccontextmanager
async def read_form(request: Request, names: Collection[str],
                    limit: int) -> AsyncIterator[Form]:
    """The form (fields of `names`) for the length of the block: FormError naming the field,
    BodyTooLarge (at once when Content-Length says so) past `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    content_type = request.headers.get("content-type", "")
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        yield await _urlencoded(request, names)
    elif kind == "multipart/form-data":
        boundary = boundary_of(content_type)
        async with spooled(request.stream(), limit) as (body, tmp):
            yield await run_in_threadpool(_multipart, body, boundary, names, tmp)
    else:
        raise FormError(f"expected a form (multipart/form-data), got '{kind or 'nothing'}'",
                        "header.Content-Type")


async def _urlencoded(request: Request, names: Collection[str]) -> Form:
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
        fields[name] = value.strip()
    return Form(fields, None, "")


def _multipart(body: BinaryIO, boundary: bytes, names: Collection[str],
               tmp: Path) -> Form:
    parts = named_parts(body, boundary, names)
    file = parts.pop(FILE, None)
    fields = {k: read_part(body, p).strip() for k, p in parts.items()}
    if file is None or (not file.filename and file.end == file.start):
        return Form(fields, None, "")  # a browser sends an empty part when none was chosen
    return Form(fields, save_file(body, file, tmp), file_name(file.filename))


def label(field: str) -> str:
    """A FormError's field as the form names its inputs: `body.top_k` -> `top_k`."""
    return "form" if field == "body" else field.removeprefix("body.")
