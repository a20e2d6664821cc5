"""Cheap probes as meta-features: does a 5-epoch run of the default MLP tell the proposer
what the meta-features do not?

    .venv/bin/python benchmarks/induction_probe.py compute --out probes.parquet [--jobs N]
        [--problems FILE]
    .venv/bin/python benchmarks/induction_probe.py evaluate --probes probes.parquet
        [--jobs N] [--partitions N] [--save DIR]
    .venv/bin/python benchmarks/induction_probe.py holdout --probes probes.parquet
        --meta HOLDOUT_META [--rows DIR]

The choice oracle (a pick that sees the problem's own test outcomes) passes the Holm line
where no zero-shot order does: what a single pick lacks is information about the problem
itself. A probe is the cheapest such information: the default MLP (`MLPSpec()`, its
recipe) trained 5 epochs on the problem, on a split and initialisation of its own (seed
100, none of the corpus's seeds 0-7, so no probe shares a run, a split or an init with any
score), early stopping off. Its features, fixed before any was looked at:

    f.probe.val_score     validation accuracy or R² (clipped to [-1, 1]) after 5 epochs
    f.probe.score_gain    that minus the same after 1 epoch (how fast it learns)
    f.probe.loss_ratio    validation loss after 5 epochs / after 1 (how far it got)
    f.probe.overfit       validation loss / training loss after 5 epochs

`compute` trains the probes of the shipped pack's problems (or `--problems FILE`, a comma
list) and writes them; `evaluate` runs the leave-one-group-out averaged over every split
of the seeds (`lopo.run_lopo_partitions`, as `induction_partitions.py`) twice, the gain
model without and with the probe features, and sets the proposer with probes against the
baselines of the run without (so kNN measures the meta-features AutoML users know);
`holdout` does the same on the holdout set: a meta-model fitted on the corpus with probes,
scored on the held-out problems (`lopo.run_holdout`), against the baselines and proposer of
`induction_holdout.py --save DIR` (`--rows DIR`). A probe costs a user about 1/15 of one
training of the default.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from induction_bench import section, table
from machine import cpu_model, git_commit

from aicf_induct.induction.baselines import resolve_default
from aicf_induct.induction.evaluate import compare, gap_closed
from aicf_induct.induction.lopo import (
    LopoConfig,
    LopoResult,
    run_holdout,
    run_lopo_partitions,
    seed_partitions,
)
from aicf_induct.induction.meta_dataset import complete_problems
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.pack import DEFAULT_PACK, load_pack

PROBE_SEED = 100  # none of the corpus's seeds
PROBE_EPOCHS = 5
PROBE_COLUMNS = ("f.probe.val_score", "f.probe.score_gain", "f.probe.loss_ratio",
                 "f.probe.overfit")
THREE = ("knn", "portfolio", "average")


def probe(name: str) -> dict[str, object]:
    """One problem's probe features (see the module docstring)."""
    from aicf_induct.frontend.families import spec_graph
    from aicf_induct.frontend.specs import MLPSpec
    from aicf_induct.problems import load_problem
    from aicf_induct.runtime.trainer import TrainConfig, Trainer

    p = load_problem(name, seed=PROBE_SEED)
    g = spec_graph(MLPSpec(), p.n_features, p.n_outputs)
    h = Trainer(p, g, TrainConfig(epochs=PROBE_EPOCHS, patience=0, seed=PROBE_SEED,
                                  backend="numpy")).fit().history
    key = "val_accuracy" if p.task == "classification" else "val_r2"
    first, last = h[0], h[-1]
    score = float(np.clip(last[key], -1, 1))
    return {"problem_id": p.problem_id, "problem": name,
            "f.probe.val_score": score,
            "f.probe.score_gain": score - float(np.clip(first[key], -1, 1)),
            "f.probe.loss_ratio": last["val_loss"] / first["val_loss"],
            "f.probe.overfit": last["val_loss"] / last["train_loss"]}


def compute(args: argparse.Namespace) -> None:
    from tqdm import tqdm

    names = (Path(args.problems).read_text().strip().split(",") if args.problems
             else load_pack(DEFAULT_PACK).problems)
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(tqdm(pool.map(probe, names), total=len(names), desc="probes"))
    pd.DataFrame(rows).to_parquet(args.out, index=False)
    print(f"{len(rows)} probes written to {args.out}")


def with_probes(meta: pd.DataFrame, probes: pd.DataFrame) -> pd.DataFrame:
    """`meta` with the probe features joined by problem name (every problem must have one;
    by name, not id: two corpus tables prepare to other contents under this machine's
    pandas than the corpus's, so their ids differ)."""
    cols = ["problem", *PROBE_COLUMNS]
    out = meta.merge(probes[cols], on="problem", how="left", validate="many_to_one")
    missing = out.loc[out[PROBE_COLUMNS[0]].isna(), "problem"].unique()
    if len(missing):
        raise SystemExit(f"no probe for {', '.join(map(str, missing))}")
    return out


def mixed(plain: LopoResult, probed: LopoResult) -> LopoResult:
    """The baselines of `plain` and the proposer of `probed` as one result."""
    keep = plain.choices[plain.choices["method"] != "proposer"]
    ours = probed.choices[probed.choices["method"] == "proposer"]
    return LopoResult(pd.concat([keep, ours], ignore_index=True), plain.calibration,
                      plain.level)


def report(name: str, plain: LopoResult, probed: LopoResult) -> list[str]:
    both = mixed(plain, probed)
    p1 = plain.choices.query("method == 'proposer'").set_index(["problem_id", "k"])
    q1 = probed.choices.query("method == 'proposer'").set_index(["problem_id", "k"])
    d = (q1["norm_error"] - p1["norm_error"].reindex(q1.index)).groupby(level="k")
    from scipy.stats import wilcoxon

    lines = [*section(f"{name}: the proposer with probes, the baselines without", both,
                      ks=(1, 3, 5)),
             "The proposer with probes minus without, per k (mean [Wilcoxon p]):", ""]
    for k, diff in d:
        v = diff.to_numpy(float)
        p = float(wilcoxon(v, zero_method="zsplit").pvalue) if np.any(v != 0) else 1.0
        lines.append(f"- k = {k}: {v.mean():+.4f} (p {p:.3g})")
    lines += ["", f"Without probes the top-1 closes {gap_closed(plain, k=1):.0%} of the gap.",
              "", "Top-3 with probes against the full search:", "",
              table(compare(both, k=3, baselines=("full_search",))), ""]
    return lines


def evaluate(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    probes = pd.read_parquet(args.probes)
    meta = load_pack(DEFAULT_PACK).seed_meta()
    parts = seed_partitions(meta)[:args.partitions or None]
    config = LopoConfig(resolve_default(meta, None), *parts[0], (1, 3, 5),
                        metamodel=MetaModel())
    plain = run_lopo_partitions(meta, config, parts, n_jobs=args.jobs, progress=True)
    probed = run_lopo_partitions(with_probes(meta, probes), config, parts, n_jobs=args.jobs,
                                 progress=True)
    if args.save:
        out = Path(args.save)
        out.mkdir(parents=True, exist_ok=True)
        plain.choices.to_csv(out / "plain.csv", index=False)
        probed.choices.to_csv(out / "probed.csv", index=False)
    print("\n".join([f"{cpu_model()}, commit {git_commit()}, {time.perf_counter() - t0:.0f} s;"
                     f" {len(parts)} splits of the seeds.", "",
                     *report("Corpus, leave-one-group-out", plain, probed)]))


def holdout(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    probes = pd.read_parquet(args.probes)
    meta = load_pack(DEFAULT_PACK).seed_meta()
    plain_rows = pd.read_csv(Path(args.rows) / "choices.csv")
    held, _ = complete_problems(pd.read_parquet(args.meta))
    held = held[held["problem_id"].isin(plain_rows["problem_id"])]  # near-duplicates out
    parts = seed_partitions(held)
    config = LopoConfig(resolve_default(meta, None), *parts[0], (1, 3, 5),
                        metamodel=MetaModel())
    probed = run_holdout(with_probes(meta, probes), with_probes(held, probes), config, parts,
                         progress=True)
    plain = LopoResult(plain_rows, pd.DataFrame(), 0.8)
    print("\n".join([f"{cpu_model()}, commit {git_commit()}, {time.perf_counter() - t0:.0f} s;"
                     f" {held['problem_id'].nunique()} held-out problems, {len(parts)} splits "
                     "of the seeds; the plain proposer is the shipped pack's.", "",
                     *report("Holdout", plain, probed)]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compute", help="train the probes and write their features")
    c.add_argument("--out", required=True)
    c.add_argument("--problems", help="a file with a comma list of problem names")
    c.add_argument("--jobs", type=int, default=2)
    c.set_defaults(func=compute)
    e = sub.add_parser("evaluate", help="leave-one-group-out with and without probes")
    e.add_argument("--probes", required=True)
    e.add_argument("--jobs", type=int, default=1)
    e.add_argument("--partitions", type=int, default=0)
    e.add_argument("--save", metavar="DIR")
    e.set_defaults(func=evaluate)
    h = sub.add_parser("holdout", help="the holdout set with probes")
    h.add_argument("--probes", required=True)
    h.add_argument("--meta", required=True, help="the held-out meta-dataset")
    h.add_argument("--rows", required=True, help="induction_holdout.py --save DIR")
    h.set_defaults(func=holdout)
    args = ap.parse_args()
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
