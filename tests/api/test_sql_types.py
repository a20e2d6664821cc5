"""Every DuckDB type at its extremes through POST /v1/sql on the real server: each value comes
back exact, or as the text docs/service.md promises. DuckDB is the oracle: a value's own
`::VARCHAR`, read by the same query, says what the JSON value must be."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from aicf_induct.cli import main as cli_main
from tests.api.conftest import cli, serve

TIME_TYPES = ("TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "DATE")
# each type's least and greatest value (DuckDB's docs), in DuckDB's own text
EXTREMES = {
    "TIMESTAMP": ("290309-12-22 (BC) 00:00:00", "294247-01-10 04:00:54.775806"),
    "TIMESTAMPTZ": ("290309-12-22 (BC) 00:00:00+00", "294247-01-10 04:00:54.775806+00"),
    "TIMESTAMP_S": ("290309-12-22 (BC) 00:00:00", "294247-01-10 04:00:54"),
    "TIMESTAMP_MS": ("290309-12-22 (BC) 00:00:00", "294247-01-10 04:00:54.775"),
    "TIMESTAMP_NS": ("1677-09-21 00:12:43.145224194", "2262-04-11 23:47:16.854775806"),
    "DATE": ("5877642-06-25 (BC)", "5881580-07-10"),
}
# values in between: Python's range ends, the epoch, a date before it, year 0 (1 BC)
MIDDLE = ("0001-01-01", "0001-01-01 (BC)", "1969-12-31 23:59:59.5", "1970-01-01",
          "2024-02-29 12:34:56.000001", "9999-12-31 23:59:59.999999", "10000-01-01 00:00:01")
INTEGERS = [("UHUGEINT", "340282366920938463463374607431768211455"),
            ("UHUGEINT", "170141183460469231731687303715884105728"),  # 2^127, past HUGEINT
            ("UHUGEINT", "0"),
            ("HUGEINT", "170141183460469231731687303715884105727"),
            ("HUGEINT", "-170141183460469231731687303715884105728"),
            ("HUGEINT", "9007199254740993"),  # 2^53 + 1: a float would say 2^53
            ("UBIGINT", "18446744073709551615"), ("BIGINT", "-9223372036854775808"),
            ("BIGINT", "9223372036854775807"),
            ("BIGNUM", "-" + "9" * 1000), ("BIGNUM", "1" + "0" * 300 + "1"), ("BIGNUM", "0"),
            ("BIGNUM", "-1"), ("BIGNUM", "-256"), ("BIGNUM", "255")]
DECIMALS = [("DECIMAL(38,0)", "99999999999999999999999999999999999999"),
            ("DECIMAL(38,0)", "-99999999999999999999999999999999999999"),
            ("DECIMAL(38,10)", "9999999999999999999999999999.9999999999"),
            ("DECIMAL(38,37)", "-9.9999999999999999999999999999999999999"),
            ("DECIMAL(18,3)", "123456789012345.678"), ("DECIMAL(18,0)", "9007199254740993"),
            ("DECIMAL(4,2)", "1.5"), ("DECIMAL(4,2)", "-0.01"), ("DECIMAL(9,4)", "0")]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    root = tmp_path_factory.mktemp("sql_types") / "wh"
    cli("keys", "create", "--scope", "read", "--warehouse", str(root))  # makes the warehouse
    with serve(root) as url, httpx.Client(base_url=url, timeout=60) as c:
        yield c, root


def rows(client: httpx.Client, sql: str) -> list[list[Any]]:
    r = client.post("/v1/sql", json={"sql": sql})
    assert r.status_code == 200, r.text
    return r.json()["rows"]


def iso(duck_text: str) -> str:
    """A time as DuckDB writes it (`::VARCHAR`) in the service's ISO 8601: `T` between date and
    time, a year before 1 as its astronomical number (1 BC is 0000), a fraction of 6 digits (9
    past microseconds), UTC as +00:00; DuckDB's 'infinity' and '-infinity' as they are."""
    if duck_text in ("infinity", "-infinity"):
        return duck_text
    m = re.fullmatch(r"(?:(\d+)-(\d\d)-(\d\d)( \(BC\))? ?)?(?:(\d\d:\d\d:\d\d)(?:\.(\d+))?)?"
                     r"(\+00)?", duck_text)
    assert m, duck_text
    year, month, day, bc, clock, frac, utc = m.groups()
    out = ""
    if year is not None:
        y = 1 - int(year) if bc else int(year)
        out = f"{'-' if y < 0 else ''}{abs(y):04d}-{month}-{day}"
    if clock is not None:
        digits = frac.rstrip("0") if frac else ""
        out += ("T" if out else "") + clock + \
            (f".{digits.ljust(6 if len(digits) <= 6 else 9, '0')}" if digits else "")
    return out + ("+00:00" if utc else "")


def literals(type_: str) -> list[str]:
    values = [*EXTREMES[type_], "infinity", "-infinity"]
    if type_ != "TIMESTAMP_NS":  # its range is 1677-2262
        values += [v.split(" ")[0] + (" (BC)" if "(BC)" in v else "")
                   if type_ == "DATE" else v for v in MIDDLE]
    return values


@pytest.mark.parametrize("type_", TIME_TYPES)
def test_times_at_their_extremes_and_infinities(service: tuple[httpx.Client, Path],
                                                type_: str) -> None:
    """'infinity'::TIMESTAMPTZ came back as "32103-01-10 04:00:54.775807Z", TIMESTAMP_NS's
    as 2262-04-11: every time type's infinities are 'infinity'/'-infinity', and a time past
    Python's years 1-9999 its exact ISO 8601 text."""
    client, _ = service
    values = ", ".join(f"('{v}'::{type_})" for v in literals(type_))
    got = rows(client, f"SELECT x, x::VARCHAR FROM (VALUES {values}) t(x)")
    assert len(got) == len(literals(type_))
    for value, text in got:
        assert value == iso(text), (type_, text)


def test_time_of_day_keeps_24_00(service: tuple[httpx.Client, Path]) -> None:
    client, _ = service
    got = rows(client, "SELECT x, x::VARCHAR FROM (VALUES ('00:00:00'::TIME), "
                       "('23:59:59.999999'::TIME), ('24:00:00'::TIME), ('12:00:00.5'::TIME)) t(x)")
    assert [v for v, _ in got] == ["00:00:00", "23:59:59.999999", "24:00:00", "12:00:00.500000"]
    assert all(v == iso(text) for v, text in got)


@pytest.mark.parametrize(("type_", "text"), INTEGERS)
def test_integers_are_exact_json_integers(service: tuple[httpx.Client, Path], type_: str,
                                          text: str) -> None:
    """UHUGEINT's maximum came back as -1.0 (its bits read as a signed decimal128, then a
    float), HUGEINT's past 2^53 rounded, a BIGNUM as its bytes: an integer of any width is an
    exact JSON integer."""
    client, _ = service
    [[value, duck]] = rows(client, f"SELECT ({text})::{type_} AS x, x::VARCHAR")
    assert type(value) is int and value == int(duck) == int(text)


@pytest.mark.parametrize(("type_", "text"), DECIMALS)
def test_decimals_are_exact(service: tuple[httpx.Client, Path], type_: str, text: str) -> None:
    """A decimal is a JSON number where that number is its value (an integral one a JSON
    integer), else its exact text: never a float that rounds it."""
    client, _ = service
    [[value, duck]] = rows(client, f"SELECT ({text})::{type_} AS x, x::VARCHAR")
    exact = Decimal(duck)
    if isinstance(value, str):
        assert Decimal(value) == exact and float(exact) != exact
    else:
        assert isinstance(value, int | float) and Decimal(repr(value)) == exact
        assert isinstance(value, int) == type_.endswith(",0)")


def test_bits_are_their_text(service: tuple[httpx.Client, Path]) -> None:
    """A BIT came back as DuckDB's own bytes, base64: it is its 0s and 1s."""
    client, _ = service
    got = rows(client, "SELECT x, x::VARCHAR FROM (VALUES ('101'::BIT), ('0000000011'::BIT), "
                       "('1'::BIT), (repeat('10', 5000)::BIT), (NULL)) t(x)")
    assert [v for v, _ in got] == [t for _, t in got]
    assert got[0][0] == "101" and len(got[3][0]) == 10_000


UHUGE_MAX = 2**128 - 1
NESTED = ("SELECT [x, 1] AS l, [x, 2]::UHUGEINT[2] AS a, {'u': x, 'h': -1::HUGEINT} AS s, "
          "MAP {x: 'infinity'::DATE} AS m, union_value(k := x) AS u, "
          "[{'t': 'infinity'::TIMESTAMPTZ}, NULL] AS lt, "
          "{'d': '-infinity'::DATE, 'n': '2262-04-11 23:47:16.854775806'::TIMESTAMP_NS} AS st "
          "FROM (SELECT 340282366920938463463374607431768211455::UHUGEINT AS x)")


def test_nested_values_are_exact_too(service: tuple[httpx.Client, Path]) -> None:
    client, _ = service
    [[lst, arr, struct, mp, union, times, struct_times]] = rows(client, NESTED)
    assert lst == [UHUGE_MAX, 1] and arr == [UHUGE_MAX, 2]
    assert struct == {"u": UHUGE_MAX, "h": -1}
    assert mp == {str(UHUGE_MAX): "infinity"} and union == UHUGE_MAX
    assert times == [{"t": "infinity"}, None]
    assert struct_times == {"d": "-infinity", "n": "2262-04-11T23:47:16.854775806"}


def test_the_cli_gives_the_same_values(service: tuple[httpx.Client, Path],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`aicf-induct sql --format json` reads results as the route does (one converter)."""
    client, root = service
    sql = ("SELECT 340282366920938463463374607431768211455::UHUGEINT AS u, "
           "(-170141183460469231731687303715884105728)::HUGEINT AS h, "
           "123456789012345.678::DECIMAL(18,3) AS d, 'infinity'::TIMESTAMPTZ AS t, "
           "'-infinity'::TIMESTAMP_NS AS n, '5881580-07-10'::DATE AS far, "
           "[1::UHUGEINT << 127] AS l")
    assert cli_main.main(["sql", sql, "--format", "json", "--warehouse", str(root)]) == 0
    [printed] = json.loads(capsys.readouterr().out)
    served = rows(client, sql)[0]
    assert list(printed.values()) == served
    assert served == [UHUGE_MAX, -2**127, "123456789012345.678", "infinity", "-infinity",
                      "5881580-07-10", [2**127]]
