"""The proposer's intervals under leave-one-group-out, on a sample of the folds.

    .venv/bin/python benchmarks/induction_calibration.py (--warehouse DIR | --pack [PACK])
        [--default KEY] [--sample N] [--shard I/N] [--conformal-folds K]
        [--conformal-repeats R] [--jobs N] [--save CSV] [--compare CSV]
    .venv/bin/python benchmarks/induction_calibration.py --merge CSV [CSV ...]

`induction_bench.py` checks the meta-model's intervals in every fold of its leave-one-out,
with every baseline beside them; with the conformal margin pooled over five fold
assignments (the pack's default) each fold fits 25 pairs of quantile models, and the whole
run takes long. This runs the same folds (the same configuration: choice on the first half
of the seeds, score on the rest, the gain model, intervals for a mean over the score seeds)
holding out a random sample of N groups only, each fold still learning from every other
group, and prints the coverage of the nominal 80 % intervals over every candidate and the
top-k. `--compare CSV`: another run's calibration rows (`--save`, or `induction_bench.py
--save DIR`'s DIR/calibration.csv) on the same problems, beside them.

`--shard I/N` holds out the I-th of N interleaved slices of those groups (every N-th,
from the I-th), so a run too long for one sitting of a machine splits into N; `--merge`
prints the coverage of the shards' saved rows together, fitting nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_source import add_source_args, load_corpus
from induction_bench import table
from machine import cpu_model, git_commit

from aicf_induct.errors import AicfError, ConfigError
from aicf_induct.induction.baselines import resolve_default
from aicf_induct.induction.evaluate import calibration
from aicf_induct.induction.lopo import LopoConfig, LopoResult, run_lopo, split_seeds
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.pack import CONFORMAL_FOLDS, CONFORMAL_REPEATS


def sample_groups(meta: pd.DataFrame, n: int, seed: int = 0) -> list[str]:
    """`n` of the corpus's groups drawn at random (all of them when `n` is 0, or at least
    their number)."""
    groups = sorted(str(g) for g in meta["group"].unique())
    if n <= 0 or n >= len(groups):
        return groups
    return sorted(np.random.default_rng(seed).choice(groups, size=n, replace=False))


def shard(groups: list[str], spec: str | None) -> list[str]:
    """The groups of shard `spec` ("I/N", 1 <= I <= N): every N-th, from the I-th."""
    if spec is None:
        return groups
    try:
        i, n = (int(part) for part in spec.split("/"))
    except ValueError:
        raise ConfigError(f"--shard {spec}: give it as I/N, e.g. 1/2") from None
    if not 1 <= i <= n:
        raise ConfigError(f"--shard {spec}: I must be between 1 and N")
    return groups[i - 1::n]


def read_calibration(paths: list[str]) -> pd.DataFrame:
    """Saved calibration rows (`--save`, or `induction_bench.py --save DIR`'s), the files'
    together; a file that cannot be read, is not such rows, or repeats another's problem is
    a one-line error."""
    parts = []
    for path in paths:
        try:
            part = pd.read_csv(path)
        except (OSError, ValueError) as err:
            raise ConfigError(f"{path}: cannot read calibration rows ({err})") from None
        missing = sorted({"problem_id", "candidate", "low", "high", "inside",
                          "proposed_rank"} - set(part.columns))
        if missing:
            raise ConfigError(f"{path}: not calibration rows (no column '{missing[0]}')")
        parts.append(part)
    rows = pd.concat(parts, ignore_index=True)
    if rows.duplicated(["problem_id", "candidate"]).any():
        raise ConfigError("the files share a problem: merge the shards of one run")
    return rows


def merge(paths: list[str]) -> int:
    """The coverage of saved calibration rows together (every shard's `--save`)."""
    rows = read_calibration(paths)
    print(f"{len(paths)} files, {rows['problem_id'].nunique()} problems.\n")
    print(table(calibration(LopoResult(pd.DataFrame(), rows, MetaModel().level))))
    return 0


# argparse leaves a required group out of the usage line when its options are not added
# one after the other (--merge comes after the source's --protocol and --seeds): spelt out
USAGE = """%(prog)s (--warehouse DIR | --pack [PACK]) [--protocol P] [--seeds N]
           [--default KEY] [--sample N] [--shard I/N] [--conformal-folds K]
           [--conformal-repeats R] [--jobs N] [--save CSV] [--compare CSV]
       %(prog)s --merge CSV [CSV ...]"""


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0], usage=USAGE)
    source = add_source_args(ap)
    ap.add_argument("--default", default=None, metavar="KEY",
                    help="the default MLP's candidate (default: MLPSpec() with the default "
                         "recipe)")
    ap.add_argument("--sample", type=int, default=0, metavar="N",
                    help="hold out N groups drawn at random (default 0: every group)")
    ap.add_argument("--shard", metavar="I/N",
                    help="hold out the I-th of N interleaved slices of those groups")
    source.add_argument("--merge", nargs="+", metavar="CSV",
                        help="print the coverage of saved rows (every shard's --save) "
                             "together, fitting nothing")
    ap.add_argument("--conformal-folds", type=int, default=CONFORMAL_FOLDS, metavar="K",
                    help=f"widen the intervals by conformalized quantile regression over K "
                         f"group folds of the training problems (default {CONFORMAL_FOLDS}, as "
                         f"the shipped pack; 0: the quantile models as fitted)")
    ap.add_argument("--conformal-repeats", type=int, default=CONFORMAL_REPEATS, metavar="R",
                    help=f"pool the out-of-fold scores of R assignments of the groups to the "
                         f"folds (default {CONFORMAL_REPEATS}, as the shipped pack)")
    ap.add_argument("--jobs", type=int, default=1, help="processes sharing the folds")
    ap.add_argument("--save", metavar="CSV", help="write the calibration rows")
    ap.add_argument("--compare", metavar="CSV", help="another run's calibration rows")
    args = ap.parse_args()
    try:
        return merge(args.merge) if args.merge else run(args)
    except AicfError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    meta = load_corpus(args)
    held = shard(sample_groups(meta, args.sample), args.shard)
    choose, score = split_seeds(meta)
    model = MetaModel(conformal_folds=args.conformal_folds,
                      conformal_repeats=args.conformal_repeats)
    config = LopoConfig(resolve_default(meta, args.default), choose, score, (1, 3, 5), 1, model)
    res = run_lopo(meta, config, n_jobs=args.jobs, progress=True, held_groups=held)
    if args.save:
        res.calibration.to_csv(args.save, index=False)
    print(f"{cpu_model()}, commit {git_commit()}, {time.perf_counter() - t0:.0f} s. "
          f"{len(held)} of {meta['group'].nunique()} groups held out in turn "
          f"({res.calibration['problem_id'].nunique()} problems); conformal folds "
          f"{args.conformal_folds}, assignments {args.conformal_repeats}.\n")
    print(table(calibration(res)))
    if args.compare:
        other = read_calibration([args.compare])
        other = other[other["problem_id"].isin(set(res.calibration["problem_id"]))]
        print(f"\n{args.compare}, the same {other['problem_id'].nunique()} problems:\n")
        print(table(calibration(LopoResult(pd.DataFrame(), other, res.level))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
