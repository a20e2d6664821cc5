"""How many bytes an Arrow IPC stream's record batches take once read, from the messages'
headers, before any batch is decompressed.

A compressed stream is small on the wire and large once read: 11 kB of zstd held 5 million
rows of steps (320 MB), so a body within the ingest route's byte limit could ask the server
for terabytes. The route checks this size against its limit first (`decoded_bytes`).

Each message's header is a FlatBuffer (the Arrow format's `Message.fbs`): a record batch
lists its body's buffers (offset, length) and says whether they are compressed; a
compressed buffer starts with its length once decompressed (a little-endian int64; -1: the
buffer was stored as it is). A dictionary batch holds a record batch the same way. Only the
few fields read here are decoded, by the FlatBuffers rules (a table's vtable of field
offsets, 32-bit offsets to tables and vectors).
"""

from __future__ import annotations

import struct

import pyarrow as pa

# MessageHeader union tags (Message.fbs)
_DICTIONARY_BATCH, _RECORD_BATCH = 2, 3
# field slots: Message.header_type, Message.header; DictionaryBatch.data;
# RecordBatch.buffers, RecordBatch.compression
_HEADER_TYPE, _HEADER, _DATA, _BUFFERS, _COMPRESSION = 1, 2, 1, 2, 3
_BUFFER_STRUCT = 16  # Buffer { offset: long; length: long }


class BadStream(ValueError):
    """A stream whose headers cannot be read (pyarrow would refuse it too)."""


def decoded_bytes(raw: bytes | pa.Buffer) -> int:
    """The bytes of every record batch of the stream `raw` once read (its buffers'
    decompressed lengths, summed). Raises BadStream on a stream that is not one."""
    try:
        reader = pa.ipc.MessageReader.open_stream(raw)
    except (pa.ArrowInvalid, OSError) as err:
        raise BadStream(str(err)) from None
    total = 0
    while True:
        try:
            message = reader.read_next_message()
        except StopIteration:
            return total
        except (pa.ArrowInvalid, OSError) as err:
            raise BadStream(str(err)) from None
        if message is None:
            return total
        if message.type in ("record batch", "dictionary"):
            try:
                total += _batch_bytes(memoryview(message.metadata),
                                      memoryview(message.body or b""))
            except (struct.error, IndexError) as err:
                raise BadStream(f"a {message.type} header that cannot be read ({err})") from None


def _batch_bytes(meta: memoryview, body: memoryview) -> int:
    message = _deref(meta, 0)
    kind = _scalar(meta, message, _HEADER_TYPE, "<B")
    header = _offset_field(meta, message, _HEADER)
    if header is None or kind not in (_RECORD_BATCH, _DICTIONARY_BATCH):
        return 0
    batch = header if kind == _RECORD_BATCH else _offset_field(meta, header, _DATA)
    if batch is None:
        return 0
    buffers = _offset_field(meta, batch, _BUFFERS)
    if buffers is None:
        return 0
    compressed = _offset_field(meta, batch, _COMPRESSION) is not None
    total = 0
    for i in range(struct.unpack_from("<I", meta, buffers)[0]):
        offset, length = struct.unpack_from("<qq", meta, buffers + 4 + _BUFFER_STRUCT * i)
        if offset < 0 or length < 0 or offset + length > len(body):
            raise IndexError(f"buffer {i} lies outside the message's body")
        if compressed and length >= 8:
            stated = struct.unpack_from("<q", body, offset)[0]
            total += length - 8 if stated == -1 else max(stated, 0)
        else:
            total += length
    return total


def _deref(buf: memoryview, at: int) -> int:
    """Where the 32-bit offset stored at `at` points."""
    return at + struct.unpack_from("<I", buf, at)[0]


def _field(buf: memoryview, table: int, slot: int) -> int | None:
    """Where field `slot` of the table at `table` is stored, or None when it is absent."""
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    entry = 4 + 2 * slot
    if entry + 2 > struct.unpack_from("<H", buf, vtable)[0]:
        return None
    offset = struct.unpack_from("<H", buf, vtable + entry)[0]
    return table + offset if offset else None


def _scalar(buf: memoryview, table: int, slot: int, fmt: str) -> int:
    at = _field(buf, table, slot)
    return 0 if at is None else int(struct.unpack_from(fmt, buf, at)[0])


def _offset_field(buf: memoryview, table: int, slot: int) -> int | None:
    at = _field(buf, table, slot)
    return None if at is None else _deref(buf, at)
