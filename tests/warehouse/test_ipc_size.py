"""`decoded_bytes` reads what an Arrow stream's batches take once read from its headers
alone: the same as pyarrow's read, on fresh random tables of every shape the ingest route
may be sent (compressed or not, cut in batches, dictionary-encoded, empty), and the size of a
compression bomb without decompressing it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from warehouse.ipc_size import BadStream, decoded_bytes


def _stream(t: pa.Table, compression: str | None = None, chunk: int | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, t.schema, options=options) as w:
        w.write_table(t, max_chunksize=chunk)
    return bytes(sink.getvalue().to_pybytes())


def _random_table(rng: np.random.Generator, n: int) -> pa.Table:
    words = np.array(["", "a", "step", "λ-loss", "x" * 40])
    return pa.table({
        "step": pa.array(rng.integers(0, 1 << 40, n)),
        "loss": pa.array(np.where(rng.random(n) < 0.1, np.nan, rng.normal(size=n))),
        "lr": pa.array(rng.random(n), mask=rng.random(n) < 0.2),
        "run_id": pa.array(words[rng.integers(0, len(words), n)]),
        "tag": pa.array(words[rng.integers(0, len(words), n)]).dictionary_encode(),
        "final": pa.array(rng.random(n) < 0.5)})


@pytest.mark.parametrize("compression", [None, "zstd", "lz4"])
@pytest.mark.parametrize("seed", range(4))
def test_the_size_read_from_the_headers_is_what_reading_takes(compression: str | None,
                                                               seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = _random_table(rng, int(rng.integers(0, 20_000)))
    chunk = int(rng.integers(1, 5_000)) if seed % 2 else None
    raw = _stream(t, compression, chunk)
    held = _held(pa.ipc.open_stream(raw).read_all())
    # the headers count each buffer as sent, padded to 8 bytes
    buffers = 3 * t.num_columns * (max(1, -(-t.num_rows // chunk)) if chunk else 1) + 3
    assert held <= decoded_bytes(raw) <= held + 8 * buffers


def _held(t: pa.Table) -> int:
    """The bytes a table's buffers hold, each counted once (a dictionary is sent once and
    shared by every batch, which `nbytes` counts per batch)."""
    sizes: dict[int, int] = {}
    for column in t.columns:
        for chunk in column.chunks:
            parts = ([chunk.indices, chunk.dictionary]
                     if isinstance(chunk, pa.DictionaryArray) else [chunk])
            for part in parts:
                for b in part.buffers():
                    if b is not None:
                        sizes[b.address] = max(sizes.get(b.address, 0), b.size)
    return sum(sizes.values())


def test_a_compression_bomb_is_sized_without_being_read() -> None:
    raw = _stream(pa.table({"a": pa.array(np.zeros(5_000_000, dtype=np.int64))}), "zstd")
    assert len(raw) < 20_000 and decoded_bytes(raw) == 40_000_000


@pytest.mark.parametrize("raw", [b"garbage" * 10, b"\xff\xff\xff\xff\x10\x00\x00\x00" + b"\0" * 8])
def test_a_stream_that_is_none_is_a_bad_stream(raw: bytes) -> None:
    with pytest.raises(BadStream):
        decoded_bytes(raw)


def test_a_cut_stream_is_a_bad_stream() -> None:
    raw = _stream(pa.table({"a": pa.array(range(1000))}))
    with pytest.raises(BadStream):
        decoded_bytes(raw[: len(raw) - 100])
