"""Plain-text tables for the terminal: columns aligned, numbers right-aligned."""

from __future__ import annotations

import math
from collections.abc import Sequence


def cell(v: object, digits: int = 3) -> str:
    if isinstance(v, bool) or v is None:
        return "" if v is None else str(v)
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.{digits}g}"
    return str(v)


def format_table(rows: Sequence[Sequence[object]], headers: Sequence[str],
                 digits: int = 3) -> str:
    if not rows:
        return "(none)"
    text = [[cell(v, digits) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in text)]) for i, h in enumerate(headers)]
    numeric = [all(isinstance(row[i], int | float) and not isinstance(row[i], bool)
                   for row in rows) and len(rows) > 0 for i in range(len(headers))]

    def line(vals: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(vals, widths, numeric, strict=True)).rstrip()

    return "\n".join([line(list(headers)), line(["-" * w for w in widths]),
                      *(line(r) for r in text)])


def print_table(rows: Sequence[Sequence[object]], headers: Sequence[str],
                digits: int = 3) -> None:
    print(format_table(rows, headers, digits))
