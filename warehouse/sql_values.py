"""A query's result values as JSON carries them, exact: what the service's SQL route answers
and `aicf-induct sql --format json` prints.

DuckDB's Arrow export loses some values that `json_safe` alone would pass on wrong, so they are
read from what Arrow still holds exactly:
  * a UHUGEINT goes out as a signed decimal128: one past 2^127 reads negative. The column's
    DuckDB type (the only thing that tells it from a HUGEINT) puts the 2^128 back, and says
    which bytes are a BIGNUM's or a BIT's own encoding (an integer, a string of 0s and 1s);
  * a time type holds DuckDB's infinities as its integer's extremes, which Python reads as an
    error or, for TIMESTAMP_NS, as a date of 2262: they are 'infinity' and '-infinity';
  * a time past Python's years 1-9999 is its exact ISO 8601 text (a year before 1 as its
    astronomical number: 1 BC is 0000), and TIME '24:00:00' stays 24:00, not midnight.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from aicf_induct.json_values import json_safe

# a column's DuckDB type (`relation.types`): duckdb.sqltypes.DuckDBPyType in DuckDB 2,
# duckdb.typing's in 1; read through its `id` and `children` only
DuckType = Any
INF_TIMESTAMP = 2**63 - 1  # DuckDB's infinity in every timestamp unit; -infinity is its negation
INF_DATE = 2**31 - 1  # and in a date32
NS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}  # nanoseconds per Arrow time unit
DAY_NS = 86_400 * 10**9
CYCLE_DAYS = 146_097  # 400 Gregorian years: the calendar repeats after them, day for day
EPOCH = dt.date(1970, 1, 1)


def json_column(col: pa.Array, duck: DuckType | None = None) -> list[Any]:
    """A result column's values, JSON-safe (`json_safe`) and exact; `duck` is the column's
    DuckDB type where known (`relation.types`): without it a UHUGEINT past 2^127 reads
    negative."""
    return [json_safe(v) for v in _values(col, duck)]


def _values(arr: pa.Array, duck: DuckType | None) -> list[Any]:
    """`arr`'s values as Python ones, nested types walked so that each leaf is read as above."""
    t = arr.type
    if pa.types.is_timestamp(t) or pa.types.is_date32(t) or pa.types.is_time(t):
        return _times(arr)
    if isinstance(arr, pa.MapArray):
        return _maps(arr, _child(duck, 0), _child(duck, 1))
    if isinstance(arr, pa.ListArray | pa.LargeListArray):
        return _lists(arr, arr.offsets.to_pylist(), _values(arr.values, _child(duck, 0)))
    if isinstance(arr, pa.FixedSizeListArray):
        n, start = t.list_size, arr.offset * t.list_size
        items = _values(arr.values, _child(duck, 0))
        return _lists(arr, [start + i * n for i in range(len(arr) + 1)], items)
    if isinstance(arr, pa.StructArray):
        fields = [_values(f, _child(duck, i)) for i, f in enumerate(arr.flatten())]
        names = [t.field(i).name for i in range(t.num_fields)]
        return [dict(zip(names, vs, strict=True)) if ok else None
                for ok, *vs in zip(arr.is_valid().to_pylist(), *fields, strict=True)]
    if isinstance(arr, pa.UnionArray) and t.mode == "sparse":
        # DuckDB's union type lists its tag first, then the members Arrow's children are
        members = [_values(arr.field(i), _child(duck, i + 1)) for i in range(t.num_fields)]
        index = {code: i for i, code in enumerate(t.type_codes)}
        return [members[index[c]][row] for row, c in enumerate(arr.type_codes.to_pylist())]
    values = _plain(arr)
    read = LEAVES.get(duck.id if duck is not None else "")
    return values if read is None else [None if v is None else read(v) for v in values]


def _bignum(b: bytes) -> int:
    """DuckDB's BIGNUM (VARINT), exported as its own bytes: a 3-byte header whose first bit is
    the sign, then the magnitude big-endian, header and magnitude inverted when negative."""
    if b[0] & 0x80:
        return int.from_bytes(b[3:], "big")
    return -int.from_bytes(bytes(~x & 0xFF for x in b[3:]), "big")


def _bits(b: bytes) -> str:
    """DuckDB's BIT, exported as its own bytes: the count of padding bits, then the bits."""
    return "".join(f"{x:08b}" for x in b[1:])[b[0]:]


# leaves DuckDB's Arrow export writes in a form of its own, by DuckDB type id
LEAVES: dict[str, Callable[[Any], Any]] = {
    "uhugeint": lambda v: int(v) % 2**128,  # a signed decimal128: past 2^127 it reads negative
    "bignum": _bignum,
    "bit": _bits,
}


def _child(duck: DuckType | None, i: int) -> DuckType | None:
    """The DuckDB type of a nested type's i-th child (a list's element, a struct's field, a
    map's key then value, a union's tag then members), or None where unknown."""
    children = duck.children if duck is not None and duck.id in (
        "list", "array", "struct", "map", "union") else []
    return children[i][1] if i < len(children) else None


def _lists(arr: pa.Array, offsets: list[int], items: list[Any]) -> list[Any]:
    return [items[offsets[i]:offsets[i + 1]] if ok else None
            for i, ok in enumerate(arr.is_valid().to_pylist())]


def _maps(arr: pa.MapArray, key: Any, value: Any) -> list[Any]:
    """Each map as a dict, or as its [key, value] pairs where a key is a list or a dict (the
    one JSON has no key for)."""
    entries = arr.values.flatten()
    pairs = zip(_values(entries[0], key), _values(entries[1], value), strict=True)
    out: list[Any] = []
    for m in _lists(arr, arr.offsets.to_pylist(), [list(p) for p in pairs]):
        hashable = m is not None and not any(isinstance(k, list | dict) for k, _ in m)
        out.append(dict(m) if hashable else m)
    return out


def _plain(arr: pa.Array) -> list[Any]:
    try:
        return arr.to_pylist(maps_as_pydicts="lossy")
    except (OverflowError, ValueError, TypeError):
        return [_scalar(s) for s in arr]


def _scalar(s: pa.Scalar) -> Any:
    """One value: as Python holds it, else as Arrow writes it as text, else a string naming its
    type; never an error."""
    for read in (lambda: s.as_py(maps_as_pydicts="lossy"), s.as_py):
        try:
            return json_safe(read())
        except (OverflowError, ValueError, TypeError):
            pass
    try:
        return s.cast(pa.string()).as_py()
    except pa.ArrowException:
        return f"<a {s.type} value JSON cannot carry>"


def _times(arr: pa.Array) -> list[str | None]:
    """Each time as ISO 8601 text, read from the integer Arrow holds: as Python's isoformat()
    writes it where Python can hold it, for any year where it cannot."""
    t = arr.type
    raw = arr.view(pa.int32() if t.bit_width == 32 else pa.int64())
    if pa.types.is_date32(t):
        return [None if d is None else _infinity(d, INF_DATE) or _date(d)
                for d in raw.to_pylist()]
    per = NS[t.unit]
    if pa.types.is_time(t):  # TIME '24:00:00' is a value of its own
        return [None if v is None else _clock(v * per) for v in raw.to_pylist()]
    utc = "+00:00" if t.tz else ""  # a TIMESTAMPTZ is an instant, written in UTC
    return [None if v is None else _infinity(v, INF_TIMESTAMP) or _timestamp(v * per, utc)
            for v in raw.to_pylist()]


def _timestamp(ns: int, utc: str) -> str:
    days, ns = divmod(ns, DAY_NS)
    return f"{_date(days)}T{_clock(ns)}{utc}"


def _infinity(v: int, inf: int) -> str | None:
    return "infinity" if v == inf else "-infinity" if v == -inf else None


def _date(days: int) -> str:
    """The proleptic Gregorian date `days` after 1970-01-01, for any year."""
    cycles, rest = divmod(days, CYCLE_DAYS)
    d = EPOCH + dt.timedelta(days=rest)  # within 1970-2369
    year = d.year + 400 * cycles
    return f"{'-' if year < 0 else ''}{abs(year):04d}-{d.month:02d}-{d.day:02d}"


def _clock(ns: int) -> str:
    """HH:MM:SS of `ns` nanoseconds into a day, with microseconds as isoformat() writes them
    (none when 0), or nanoseconds where there are any (as pandas writes them)."""
    s, frac = divmod(ns, 10**9)
    digits = "" if not frac else f".{frac // 1000:06d}" if frac % 1000 == 0 else f".{frac:09d}"
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}{digits}"
