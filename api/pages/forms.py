"""An HTML form's body: `multipart/form-data` (a file upload) or urlencoded, parsed with the
standard library's MIME parser (the service does not depend on python-multipart)."""

from __future__ import annotations

from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP
from urllib.parse import parse_qsl


@dataclass(frozen=True)
class Part:
    value: bytes
    filename: str | None  # set for a file input


class FormError(ValueError):
    """A body that is not the form it claims to be."""


def parse_form(content_type: str, body: bytes) -> dict[str, Part]:
    """Field name -> its part (the first one when a name repeats)."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        try:
            pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True)
        except UnicodeDecodeError:
            raise FormError("the form is not UTF-8") from None
        return {k: Part(v.encode(), None) for k, v in reversed(pairs)}
    if kind != "multipart/form-data":
        raise FormError(f"expected a form (multipart/form-data), got '{kind or 'nothing'}'")
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    msg = BytesParser(policy=HTTP).parsebytes(head + body)
    if not msg.is_multipart() or msg.defects:
        raise FormError("the multipart form could not be parsed")
    out: dict[str, Part] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or name in out:
            continue
        payload = part.get_payload(decode=True)
        out[name] = Part(payload if isinstance(payload, bytes) else b"", part.get_filename())
    return out


def text(form: dict[str, Part], name: str) -> str:
    part = form.get(name)
    return part.value.decode("utf-8", errors="replace").strip() if part else ""
