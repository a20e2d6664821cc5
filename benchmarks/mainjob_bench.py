"""Main-job benchmark: one adaptive run from the proposal against what a user would otherwise
do, per problem held out of the proposer by leave-one-group-out.

    .venv/bin/python benchmarks/mainjob_bench.py (--warehouse DIR | --pack [PACK] --history DIR)
        [--seeds N] [--groups N] [--steps S]
        [--patience P] [--guard level|counterfactual] [--guard-margin F] [--default KEY]
        [--feedback DIR] [--variant NAME:KEY=VALUE,...]... [--train-seeds S,S,...]
        [--jobs N] [--rows-out CSV [--resume]]
        [--shard I/N --rows-out CSV | --from-rows CSV...] [--write-results]

The warehouse holds a sweep corpus (a full matrix: every problem × candidate × seed) and
adaptive runs (`corpus build --adaptive N`: the rewrite history); or the corpus comes from a
knowledge pack's per-seed scores and compute (`--pack`) and the rewrite history from
`--history`. The seeds are halved as in
the induction benchmark: methods that choose, choose on the first half (validation) and
are scored on the second (test). For each held-out group, the structure proposer is fitted
on the other groups' corpus rows and the learned rewrite proposer on the other groups'
rewrite history; then for each problem of the group:

  A  one adaptive run from the top-1 proposal per score seed (learned rewrites, rule
     fallback, the counterfactual guard as `adapt --from-proposal` has it, `--guard level`
     the older one; the best model by validation reported on test);
  B  the default MLP trained statically (the corpus's runs, score seeds);
  C  the top-1 proposal trained statically (the corpus's runs, score seeds);
  C_here  the top-1 proposal trained here as A is, its policy making no rewrite (A's
     runtime, backend, seeds and stopping rule): A − C_here is what the rewrites did,
     apart from how this run's training differs from the corpus's (backend, code);
  D  the full sweep: every candidate on the choose seeds, the best by validation scored on
     the score seeds; its compute is the whole sweep on the choose seeds;
  E  random search at A's compute: candidates in random order (choose seeds) until their
     compute passes A's, the best by validation scored on the score seeds (mean of 20 draws).

Compute is parameter-steps: Σ over executed steps of the model's parameter count (for A,
integrated over its evaluations, rolled-back steps included). Errors are normalized as
the induction benchmark normalizes them (`meta_dataset.mean_normalized_error`): each score
seed's test error, A's runs included, becomes (err − best) / (median − best) clipped to
[0, 1], best and median of the problem's candidates' mean test errors over all seeds, and a
method's score is the mean over the score seeds (E's, the mean over its draws); B, C and D
score exactly as the same candidates do in the induction benchmark. Reported: mean
normalized error per method [95 % bootstrap CI], A − X paired differences with CIs and
Wilcoxon p, A's compute over D's, and the rewrite proposer's precision (share of its
rewrites the guard kept); with `--feedback DIR`, the same after one round of feedback (A's
runs logged into DIR and added to the rewrite history, each problem's own left out). The
structure proposer learns from the full-matrix sweep runs only (the meta-dataset reads
origin `sweep`), so feedback changes the rewrite proposer, not the structure proposal.

`--variant NAME:min_gain=F,guard_steps=K,level=L` adds a column A_NAME: A with a stricter
guard margin, a longer guard trial or a stricter interval for the rewrite proposer (only
stricter: then a run in which A applied no rewrite is the variant's run too, and C_here's,
step for step, so both are trained only on the seeds where A rewrote; `--no-shortcut` trains
them everywhere). `--guard-margin F` sets A's own margin (the runtime's default otherwise),
and the variants are stricter than it. `--train-seeds` trains A, C_here and the variants on
other seeds than the score seeds: a replication of A on fresh runs (B to E stay the corpus's
runs). Groups start largest first; with `--rows-out` each group's rows are
written as it ends, and `--resume` goes on from them after a run stopped part-way.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing as mp
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus_source import add_source_args, load_corpus
from machine import cpu_model, git_commit, publish
from scipy.stats import wilcoxon
from script_errors import existing_file, fail, run_main
from threadpoolctl import threadpool_limits

from aicf_induct.induction.baselines import resolve_default
from aicf_induct.induction.inference import bootstrap_mean_ci
from aicf_induct.induction.lopo import split_seeds
from aicf_induct.induction.meta_dataset import mean_normalized_error
from aicf_induct.induction.metamodel import MetaModel
from aicf_induct.induction.proposer import Proposer
from aicf_induct.induction.rewrite_effects import RewriteEffects
from aicf_induct.induction.rewrite_history import COLUMNS, excluding, load_rewrite_history
from aicf_induct.induction.space import candidate_of
from aicf_induct.runtime.guard import GUARDS, GuardConfig

HEADING = "## Main job: adaptive from the proposal vs static, top-1, full sweep, random search"
METHODS = ("A_adaptive", "B_default", "C_top1", "C_here", "D_sweep", "E_random")


class NoRewrites:
    """A policy that never rewrites: A's run as a static one (`C_here`)."""

    name = "none"

    def decide(self, obs: Any) -> None:
        return None


@dataclass(frozen=True)
class Variant:
    """A's settings that `--variant` changes: the counterfactual guard's margin and trial,
    and the rewrite proposer's interval level. Each may only be as strict as A's or
    stricter, so a run in which A applied no rewrite is the variant's run too (the
    shortcut `evaluate_group` takes: it trains a variant only where A rewrote)."""

    name: str
    min_gain: float = GuardConfig.min_gain  # relative validation gain over the control arm
    guard_steps: int = GuardConfig.steps  # the trial's steps (K)
    level: float = RewriteEffects().level  # the proposer's interval: a rewrite's lower end
    # above 0 at this level


def parse_variant(text: str, base: Variant = Variant("A")) -> Variant:
    """`NAME:key=value[,key=value]` with keys min_gain, guard_steps, level; a setting not
    given is A's (`base`), and one given may not be looser than A's."""
    name, _, spec = text.partition(":")
    if not name.isidentifier():
        raise argparse.ArgumentTypeError(f"variant name {name!r}: letters, digits and _ only")
    values: dict[str, Any] = {}
    types = {"min_gain": float, "guard_steps": int, "level": float}
    for item in filter(None, spec.split(",")):
        key, _, value = item.partition("=")
        if key not in types:
            raise argparse.ArgumentTypeError(
                f"variant {name}: unknown setting {key!r} (known: {', '.join(types)})")
        try:
            values[key] = types[key](value)
        except ValueError:
            kind = "whole number" if types[key] is int else "number"
            raise argparse.ArgumentTypeError(
                f"variant {name}: {key}={value!r} is not a {kind}") from None
        if values[key] < getattr(base, key) or (key == "level" and values[key] >= 1):
            raise argparse.ArgumentTypeError(
                f"variant {name}: {key}={value} is looser than A's {getattr(base, key)} "
                "(a variant may only be stricter; level below 1)")
    return Variant(name, **{"min_gain": base.min_gain, "guard_steps": base.guard_steps,
                            "level": base.level, **values})
def adaptive_run(problem_name: str, structure_key: str, seed: int, effects: RewriteEffects,
                 n_rows: float, steps: int, patience: int, backend: str = "auto",
                 log_to: str | None = None, guard: str = "counterfactual",
                 rewrites: bool = True, variant: Variant | None = None) -> dict[str, Any]:
    """Method A on one seed: test error of the best model and its parameter-steps (logged
    into the warehouse `log_to` when given: the feedback round's history); `rewrites`
    False: the same run with no rewrite (`C_here`); `variant`: A with its guard and
    proposer settings."""
    from aicf_induct.induction.mainjob import LearnedRewritePolicy, local_rewrites
    from aicf_induct.problems import load_problem
    from aicf_induct.runtime.adaptive import AdaptConfig, AdaptiveRun
    from aicf_induct.runtime.policies import RuleBasedPolicy
    from aicf_induct.runtime.trainer import TrainConfig

    problem = load_problem(problem_name, seed=seed)
    cand = candidate_of(structure_key)
    r = cand.recipe
    config = TrainConfig(optimizer=r.optimizer, lr=r.lr, weight_decay=r.weight_decay,
                         batch_size=r.batch_size, seed=seed, backend=backend)
    # the corpus's protocol (validation at each epoch's end, early stopping after `patience`
    # epochs without a new best, a kept rewrite starting its patience again), so that A and
    # the static runs it is compared with stop by the same rule
    v = variant or Variant("A")
    adapt = AdaptConfig(steps=steps, warmup_steps=min(100, steps // 4), eval_every=0,
                        early_stop=patience,
                        guard=GuardConfig(steps=v.guard_steps, min_gain=v.min_gain,
                                          counterfactual=guard == "counterfactual"))
    if v.level != effects.level:
        effects = RewriteEffects.from_table(effects.table_,
                                            **{**effects.get_params(), "level": v.level})
    policy = LearnedRewritePolicy(local_rewrites(effects, n_rows), RuleBasedPolicy(),
                                  stream=sys.stderr) if rewrites else NoRewrites()
    rec = None
    if log_to:
        import warehouse  # only here: a machine without DuckDB runs the rest

        rec = warehouse.open_recorder(log_to)
    try:
        res = AdaptiveRun(problem, cand.graph(problem.n_features, problem.n_outputs), config,
                          adapt, policy, recorder=rec).run()
    finally:
        if rec is not None:
            rec.close()
    metric = "test_r2" if problem.task == "regression" else "test_accuracy"
    compute, last = 0.0, 0.0
    for h in res.history:  # parameter count at each evaluation covers the steps before it
        compute += (h["work"] - last) * h["param_count"]
        last = h["work"]
    compute += (res.work - last) * res.graph.param_count()
    learned = [e for e in res.events if e.kind == "decision" and e.name != "none"
               and not str(e.detail.get("source", "")).endswith("fallback")]
    kept = sum(1 for e in res.events if e.kind == "guard" and e.detail.get("verdict") == "keep"
               and any(d.step == e.detail.get("rewrite_step") and d.name == e.name
                       for d in learned))
    kept_names = [e.name for e in res.events if e.kind == "guard"
                  and e.detail.get("verdict") == "keep"]
    return {"error": 1.0 - float(res.metrics[metric]), "compute": compute,
            "learned_rewrites": len(learned), "learned_kept": kept,
            "rewrites": res.rewrites, "kept_names": kept_names,
            "decisions": sum(1 for e in res.events if e.kind == "decision"),
            "best_val_loss": float(res.best_val_loss)}


def load_context(args: argparse.Namespace) -> dict[str, Any]:
    """What every held-out group reads: the meta-dataset, the rewrite history, the runs'
    compute, the default and the seed halves."""
    meta = load_corpus(args)
    choose, score = split_seeds(meta)
    compute = meta.set_index(["problem_id", "candidate", "seed"])[["param_steps"]]
    return {"args": args, "meta": meta, "choose": choose, "score": score,
            "trained": tuple(args.train_seeds or score), "history": rewrite_history(args),
            "compute": compute.rename(columns={"param_steps": "compute"}),
            "default": resolve_default(meta, args.default)}


def rewrite_history(args: argparse.Namespace) -> pd.DataFrame:
    """The decisions of `--history`: a warehouse, or a Parquet file of the table
    `load_rewrite_history` returns (a copy that travels without the warehouse)."""
    source = args.history or args.warehouse
    if Path(source).suffix != ".parquet":
        return load_rewrite_history(source, args.horizon)
    if args.horizon:
        fail("--horizon applies when the history is read from a warehouse, not from a "
             "Parquet copy")
    if not Path(source).is_file():
        fail(f"--history {source}: no such file")
    table = pd.read_parquet(source)
    if missing := [c for c in COLUMNS if c not in table.columns]:
        fail(f"--history {source}: not a rewrite-history table (no {', '.join(missing)})")
    return table


_CONTEXT: dict[str, Any] = {}


def _start_worker(args: argparse.Namespace) -> None:
    # one BLAS thread per worker: the jobs share the cores (a BLAS pool per worker made 4
    # busy threads on 2 cores, and the problems went at a third of the speed)
    threadpool_limits(1)
    _CONTEXT.update(load_context(args))


def _group_in_worker(index: int, group: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return evaluate_group(_CONTEXT, index, group)


def _feedback_in_worker(job: dict[str, Any]) -> tuple[float, int, int]:
    if "pooled" not in _CONTEXT:  # A's logged runs exist only once the first pass is over
        _CONTEXT["pooled"] = pooled_history(_CONTEXT["args"], _CONTEXT["history"])
    return feedback_a(_CONTEXT, _CONTEXT["pooled"], job)


def pooled_history(args: argparse.Namespace, history: pd.DataFrame) -> pd.DataFrame:
    """The rewrite history with A's first-pass runs added (the feedback round's)."""
    return pd.concat([history, load_rewrite_history(args.feedback, args.horizon)],
                     ignore_index=True)


def feedback_a(ctx: dict[str, Any], pooled: pd.DataFrame, job: dict[str, Any]) -> \
        tuple[float, int, int]:
    """A again on one problem, its rewrite proposer refit on the pooled history without
    the problem's group: normalized error, learned rewrites, kept."""
    effects = RewriteEffects().fit(excluding(pooled, job["names"]))
    a_errs, _, learned, kept = totals(method_a(job, effects, ctx["trained"], ctx["args"],
                                               None))
    return mean_normalized_error(a_errs, job["rows"]), learned, kept


def evaluate_group(ctx: dict[str, Any], index: int, g: Any) -> \
        tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A to E on the problems of held-out group `g` (its `index` seeds E's draws, so a
    group's figures do not depend on which process or in what order it ran)."""
    args, meta, history, compute = ctx["args"], ctx["meta"], ctx["history"], ctx["compute"]
    choose, score, default, trained = ctx["choose"], ctx["score"], ctx["default"], ctx["trained"]
    rng = np.random.default_rng([args.seed, index])
    rows: list[dict[str, Any]] = []
    jobs: list[dict[str, Any]] = []
    held = meta["group"] == g
    train = meta[~held]
    prop = Proposer(metamodel=MetaModel(max_iter=args.max_iter)).fit(train)
    names = set(meta.loc[held, "problem"]) | set(meta.loc[held, "problem_id"])
    effects = RewriteEffects().fit(excluding(history, names)) if len(history) else \
        RewriteEffects.from_table(pd.DataFrame())
    only = listed(args)
    for pid, rows_p in meta[held].groupby("problem_id"):
        if only and str(rows_p["problem"].iloc[0]) not in only:
            continue
        info = rows_p.iloc[0]
        feats = {c: float(info[c]) for c in rows_p.columns if c.startswith("f.")}
        top = prop.propose(feats, 1).candidates[0]
        test = rows_p.pivot_table(index="candidate", columns="seed", values="test_error")
        val = rows_p.pivot_table(index="candidate", columns="seed", values="val_error")
        comp = compute.loc[str(pid)]["compute"]
        job = {"problem": str(info["problem"]), "key": top.structure_key, "names": names,
               "n_rows": feats.get("f.simple.n_rows", np.nan),
               "rows": rows_p[["candidate", "test_error"]]}
        jobs.append(job)
        a_runs = method_a(job, effects, trained, args, args.feedback)
        a_errs, a_comp, learned, kept = totals(a_runs)
        # A run that applied no rewrite is, step for step, the run with none (C_here's) and
        # every variant's (a variant is only stricter): trained again only where A rewrote
        # (`--no-shortcut`: everywhere, to check that)
        again = [args.no_shortcut or r["rewrites"] > 0 for r in a_runs]
        here = where_a_rewrote(job, a_runs, again, effects, trained, args, rewrites=False)
        variants = {v.name: where_a_rewrote(job, a_runs, again, effects, trained, args,
                                            guard=args.guard, variant=v)
                    for v in args.variant}
        sweep = val[list(choose)].mean(axis=1).idxmin()
        d_comp = float(comp[comp.index.get_level_values("seed").isin(choose)].sum())
        e_picks = [random_search(val, comp, choose, a_comp, rng) for _ in range(args.n_random)]
        scored = {c: mean_normalized_error(test.reindex(index=[c], columns=list(score)).iloc[0],
                                           rows_p)
                  for c in {default, top.candidate, sweep, *e_picks}}  # on the score seeds
        rows.append({"problem": str(info["problem"]), "group": g,
                     "A_adaptive": mean_normalized_error(a_errs, rows_p),
                     "B_default": scored[default], "C_top1": scored[top.candidate],
                     "C_here": mean_normalized_error([r["error"] for r in here], rows_p),
                     "D_sweep": scored[sweep],
                     "E_random": float(np.mean([scored[c] for c in e_picks])),
                     "A_compute": a_comp, "D_compute": d_comp,
                     # raw, not normalized (which clips at the best candidate's): the mean
                     # test error of A's runs
                     "A_error": float(np.mean(a_errs)),
                     "learned": learned, "kept": kept, "task": info.get("task", ""),
                     "n_rows": job["n_rows"], "rewrote_seeds": int(sum(again)),
                     "kept_transforms": ";".join(sorted(n for r in a_runs
                                                        for n in r["kept_names"])),
                     "A_val_vs_here": relative_val(a_runs, here)})
        for name, runs in variants.items():
            v_errs, v_comp, v_learned, v_kept = totals(runs)
            rows[-1].update({f"A_{name}": mean_normalized_error(v_errs, rows_p),
                             f"A_{name}_compute": v_comp,
                             f"learned_{name}": v_learned, f"kept_{name}": v_kept,
                             f"A_{name}_val_vs_here": relative_val(runs, here)})
        print(f"{info['problem']}: " + ", ".join(f"{m} {rows[-1][m]:.3f}" for m in METHODS)
              + f"; A/D compute {a_comp / max(d_comp, 1):.3f}", file=sys.stderr, flush=True)
    return rows, jobs


def where_a_rewrote(job: dict[str, Any], a_runs: list[dict[str, Any]], again: list[bool],
                    effects: RewriteEffects, seeds: tuple[int, ...], args: argparse.Namespace,
                    **how: Any) -> list[dict[str, Any]]:
    """The run `how` asks for (`adaptive_run`'s keywords) on each of A's seeds: trained where
    `again` says (A rewrote there), else A's own run, which is that run step for step."""
    return [adaptive_run(job["problem"], job["key"], s, effects, job["n_rows"], args.steps,
                         args.patience, args.backend, **how) if redo else r
            for s, redo, r in zip(seeds, again, a_runs, strict=True)]


def relative_val(runs: list[dict[str, Any]], base: list[dict[str, Any]]) -> float:
    """Mean over seeds of the best validation loss's relative difference from `base`'s
    (negative: lower than the run without rewrites)."""
    return float(np.mean([(r["best_val_loss"] - b["best_val_loss"]) / abs(b["best_val_loss"])
                          if b["best_val_loss"] else 0.0
                          for r, b in zip(runs, base, strict=True)]))


def listed(args: argparse.Namespace) -> set[str]:
    """The problems `--only FILE` names (one per line; empty: every problem)."""
    if not args.only:
        return set()
    return {line.strip() for line in Path(args.only).read_text().splitlines() if line.strip()}


def largest_first(meta: pd.DataFrame, groups: list[Any]) -> list[int]:
    """Indices of `groups`, the most rows first: the longest groups start first, so the
    processes do not wait on one that started last."""
    if "f.simple.n_rows" not in meta:
        return list(range(len(groups)))
    rows = meta.drop_duplicates("problem_id").groupby("group")["f.simple.n_rows"].sum()
    return sorted(range(len(groups)), key=lambda i: (-float(rows.get(groups[i], 0.0)), i))


def append_rows(path: str | None, rows: list[dict[str, Any]]) -> None:
    """One group's rows at the end of `--rows-out`, as soon as the group is done, so a run
    stopped part-way keeps them (`--resume` goes on from there)."""
    if path and rows:
        out = Path(path)
        pd.DataFrame(rows).to_csv(out, mode="a", index=False,
                                  header=not out.exists() or out.stat().st_size == 0)


def done_groups(args: argparse.Namespace) -> set[str]:
    """The groups `--rows-out` holds already (`--resume`)."""
    if not (args.resume and Path(args.rows_out).is_file()):
        return set()
    return set(pd.read_csv(args.rows_out, dtype={"group": str})["group"])


def evaluate(args: argparse.Namespace) -> tuple[pd.DataFrame, dict[str, Any]]:
    ctx = load_context(args)
    meta, history, score = ctx["meta"], ctx["history"], ctx["score"]
    groups = sorted(meta["group"].unique())[:args.groups or None]
    indices = list(range(len(groups)))  # a group's index seeds its draws, whatever the share
    if only := listed(args):  # the groups of the problems named (each still held out whole)
        keep = set(meta.loc[meta["problem"].isin(only), "group"])
        indices, groups = [i for i in indices if groups[i] in keep], [g for g in groups
                                                                      if g in keep]
    if args.shard:  # this process's share; `--from-rows` reports the shares together
        share, count = args.shard
        indices, groups = indices[share::count], groups[share::count]
    done = done_groups(args)
    if args.rows_out and not args.resume:
        Path(args.rows_out).unlink(missing_ok=True)
    todo = [(indices[k], groups[k]) for k in largest_first(meta, groups)
            if str(groups[k]) not in done]
    pool = ProcessPoolExecutor(args.jobs, mp_context=mp.get_context("spawn"),
                               initializer=_start_worker, initargs=(args,)) \
        if args.jobs > 1 else None  # spawned, not forked: DuckDB's threads run here
    try:
        rows: list[dict[str, Any]] = []
        jobs: list[dict[str, Any]] = []
        if pool:
            parts = as_completed([pool.submit(_group_in_worker, i, g) for i, g in todo])
        else:
            parts = (evaluate_group(ctx, i, g) for i, g in todo)
        for part in parts:
            part_rows, part_jobs = part.result() if isinstance(part, Future) else part
            append_rows(args.rows_out, part_rows)
            rows += part_rows
            jobs += part_jobs
        df = pd.DataFrame(rows)
        if done:  # the groups an earlier, stopped run finished
            df = pd.read_csv(args.rows_out, dtype={"group": str})
        if args.feedback:  # one round: A again, the other problems' A runs in the history
            if pool:
                again = list(pool.map(_feedback_in_worker, jobs))
            else:
                pooled = pooled_history(args, history)
                again = [feedback_a(ctx, pooled, job) for job in jobs]
            df[["A_feedback", "learned_feedback", "kept_feedback"]] = again
    finally:
        if pool:
            pool.shutdown()
    # in the problems' order, as `--from-rows` reports them: the groups end in any order, and
    # the bootstrap's intervals depend on the rows' order (A_feedback is in place: its rows
    # came in the order of `jobs`)
    df = df.sort_values("problem", ignore_index=True)
    return df, {"default": ctx["default"], "choose": ctx["choose"], "score": score,
                "trained": ctx["trained"], "history": len(history), "groups": len(groups)}


def parse_seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seeds such as 8,9,10,11, got {text!r}") \
            from None
    if len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"distinct seeds of 0 or more, got {text!r}")
    return seeds


def parse_shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(v) for v in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected I/N, e.g. 0/2, got {text!r}") from None
    if not 0 <= index < count:
        raise argparse.ArgumentTypeError(f"need 0 <= I < N, got {text!r}")
    return index, count


def combined_rows(args: argparse.Namespace) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The per-problem rows of every share, and the facts the report states."""
    df = pd.concat([pd.read_csv(f) for f in args.from_rows], ignore_index=True)
    if df["problem"].duplicated().any():
        dup = sorted(df.loc[df["problem"].duplicated(), "problem"])[:5]
        fail(f"--from-rows: problems in more than one file: {', '.join(dup)}")
    ctx = load_context(args)
    return df.sort_values("problem", ignore_index=True), {
        "default": ctx["default"], "choose": ctx["choose"], "score": ctx["score"],
        "trained": ctx["trained"], "history": len(ctx["history"]),
        "groups": df["group"].nunique()}


def a_settings(args: argparse.Namespace) -> Variant:
    """A's own guard margin (`--guard-margin`; the runtime's default), trial and interval."""
    return Variant("A", min_gain=args.guard_margin)


def method_a(job: dict[str, Any], effects: RewriteEffects, seeds: tuple[int, ...],
             args: argparse.Namespace, log_to: str | None) -> list[dict[str, Any]]:
    """A on the seeds it trains on: `adaptive_run`'s answer per seed."""
    return [adaptive_run(job["problem"], job["key"], s, effects, job["n_rows"], args.steps,
                         args.patience, args.backend, log_to, args.guard,
                         variant=a_settings(args)) for s in seeds]


def totals(runs: list[dict[str, Any]]) -> tuple[list[float], float, int, int]:
    """Test error per seed, total compute, learned rewrites and those kept."""
    return ([float(r["error"]) for r in runs], float(np.sum([r["compute"] for r in runs])),
            sum(r["learned_rewrites"] for r in runs), sum(r["learned_kept"] for r in runs))


def random_search(val: pd.DataFrame, comp: pd.Series, choose: tuple[int, ...],
                  budget: float, rng: np.random.Generator) -> str:
    """E: candidates in random order until their compute on the choose seeds passes
    `budget` (at least one); the best by validation (it is scored on the score seeds)."""
    order, spent, seen = rng.permutation(val.index.to_numpy()), 0.0, []
    for cand in order:
        seen.append(cand)
        spent += float(sum(comp.get((cand, s), 0.0) for s in choose))
        if spent >= budget:
            break
    return str(val.loc[seen, list(choose)].mean(axis=1).idxmin())


def report(df: pd.DataFrame, facts: dict[str, Any], args: argparse.Namespace,
           took: float) -> str:
    margin = f" (margin {args.guard_margin:.0%})" if args.guard == "counterfactual" else ""
    # A trained on other seeds than the score seeds (`--train-seeds`): a replication on
    # fresh runs, B to E still the corpus's runs on its score seeds
    fresh = "" if tuple(facts["trained"]) == tuple(facts["score"]) else (
        f" A, C_here and the variants trained on seeds {list(facts['trained'])} (B, C, D and "
        "E: the corpus's runs on its score seeds).")
    lines = [HEADING, "",
             f"{dt.date.today()}, {cpu_model()}, commit {git_commit()}; `python "
             f"benchmarks/mainjob_bench.py {' '.join(sys.argv[1:])}` ({took:.0f} s)", "",
             f"{len(df)} problems in {facts['groups']} held-out groups; choose seeds "
             f"{list(facts['choose'])}, score seeds {list(facts['score'])}; default "
             f"{facts['default']}; rewrite history {facts['history']} decisions; A: "
             f"early stopping after {args.patience} epochs without a new best validation "
             f"loss, {args.steps} steps at most per run, the {args.guard} guard{margin}."
             f"{fresh}", "",
             "| method | mean normalized error | 95 % CI |", "|---|---|---|"]
    methods = [m for m in METHODS if m in df]  # (rows of before C_here have none)
    for m in methods:
        lo, hi = bootstrap_mean_ci(df[m].to_numpy(), seed=args.seed)
        lines.append(f"| {m} | {df[m].mean():.3f} | [{lo:.3f}, {hi:.3f}] |")
    lines += ["", "| A − X | mean difference | 95 % CI | Wilcoxon p | A better on |",
              "|---|---|---|---|---|"]
    for m in methods[1:]:
        d, lo, hi, p = paired(df, "A_adaptive", m, args.seed)
        lines.append(f"| {m} | {d.mean():+.3f} | [{lo:+.3f}, {hi:+.3f}] | {p:.3g} | "
                     f"{int((d < 0).sum())} of {len(d)} |")
    if "A_feedback" in df:
        d, lo, hi, p = paired(df, "A_feedback", "A_adaptive", args.seed)
        pf = df["kept_feedback"].sum() / df["learned_feedback"].sum() \
            if df["learned_feedback"].sum() else float("nan")
        lines += ["", f"After one round of feedback (A's runs on the other groups added to the "
                      f"rewrite history): A {df['A_feedback'].mean():.3f}, change "
                      f"{d.mean():+.3f} [{lo:+.3f}, {hi:+.3f}], Wilcoxon p {p:.3g}; precision "
                      f"{int(df['kept_feedback'].sum())} of "
                      f"{int(df['learned_feedback'].sum())} ({pf:.0%})."]
    lines += variant_lines(df, args.seed)
    ratio = df["A_compute"].sum() / max(df["D_compute"].sum(), 1.0)
    prec = df["kept"].sum() / df["learned"].sum() if df["learned"].sum() else float("nan")
    lines += ["", f"A's compute (parameter-steps) over D's: {ratio:.4f} (goal <= 0.05); "
                  f"rewrite proposer's precision: {int(df['kept'].sum())} of "
                  f"{int(df['learned'].sum())} learned rewrites kept by the guard "
                  f"({prec:.0%})."]
    return "\n".join(lines)


def paired(df: pd.DataFrame, a: str, b: str, seed: int) -> tuple[np.ndarray, float, float,
                                                                   float]:
    """Column `a` − column `b` per problem, its mean's bootstrap 95 % CI and the Wilcoxon
    p (NaN when every difference is 0)."""
    d = (df[a] - df[b]).to_numpy()
    lo, hi = bootstrap_mean_ci(d, seed=seed)
    p = float(wilcoxon(d).pvalue) if np.any(d != 0) and len(d) > 1 else float("nan")
    return d, lo, hi, p


def variant_lines(df: pd.DataFrame, seed: int) -> list[str]:
    """Each variant of A (`--variant`) against A, C_here and B."""
    names = [c[len("learned_"):] for c in df.columns
             if c.startswith("learned_") and c != "learned_feedback"]
    if not names:
        return []
    lines = ["", "Variants of A (stricter settings, the same runs where A applied no rewrite):",
             "", "| variant | mean | − A [95 % CI], p | − C_here [95 % CI], p | − B [95 % CI], p | "
             "kept of learned | compute / D's |", "|---|---|---|---|---|---|---|"]
    for name in names:
        col, cells = f"A_{name}", []
        for other in ("A_adaptive", "C_here", "B_default"):
            d, lo, hi, p = paired(df, col, other, seed)
            cells.append(f"{d.mean():+.3f} [{lo:+.3f}, {hi:+.3f}], {p:.3g}")
        comp = f"{col}_compute"  # (rows written before it was recorded have none)
        ratio = f"{df[comp].sum() / max(df['D_compute'].sum(), 1.0):.4f}" if comp in df else ""
        lines.append(f"| {name} | {df[col].mean():.3f} | " + " | ".join(cells) +
                     f" | {int(df[f'kept_{name}'].sum())} of {int(df[f'learned_{name}'].sum())} "
                     f"| {ratio} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_source_args(ap)
    ap.add_argument("--history", help="warehouse of the rewrite history (default: --warehouse; "
                                      "needed with --pack), or a .parquet copy of its "
                                      "decisions (rewrite_history.load_rewrite_history's "
                                      "table, written with DataFrame.to_parquet)")
    ap.add_argument("--default", help="the default MLP (candidate key, structure key or spec)")
    ap.add_argument("--groups", type=int, default=0, help="held-out groups (0: all)")
    ap.add_argument("--steps", type=int, default=50_000,
                    help="A's cap on optimizer steps per run (default 50000; early stopping "
                         "ends a run long before on the corpus's problems)")
    ap.add_argument("--patience", type=int, default=20,
                    help="A's early stopping: epochs without a new best validation loss "
                         "(default 20, the corpus's)")
    ap.add_argument("--horizon", type=int, default=0, metavar="STEPS",
                    help="the rewrite history's effects over this many steps after a decision "
                         "(cut at the next rewrite) instead of the guard's window (default 0: "
                         "the guard's)")
    ap.add_argument("--n-random", type=int, default=20, help="draws averaged for E")
    ap.add_argument("--max-iter", type=int, default=200, help="meta-model boosting rounds")
    ap.add_argument("--backend", default="auto", choices=["auto", "numpy", "cupy"],
                    help="A's backend (default auto: CuPy on a GPU)")
    ap.add_argument("--feedback", metavar="DIR",
                    help="log A's runs into this warehouse, then run A again with them added "
                         "to the rewrite history (each problem without its own): one round "
                         "of feedback, and the rewrite precision before and after")
    ap.add_argument("--guard", choices=GUARDS, default="counterfactual",
                    help="A's guard: against the run continued without the rewrite (a control "
                         "arm; default, as `adapt --from-proposal`), or against the losses "
                         "before it")
    ap.add_argument("--guard-margin", type=float, default=GuardConfig.min_gain, metavar="F",
                    help=f"A's counterfactual guard margin: a rewrite is kept when its "
                         f"validation loss is below the control arm's less this share "
                         f"(default {GuardConfig.min_gain}, the runtime's)")
    ap.add_argument("--train-seeds", type=parse_seeds, metavar="S,S,...",
                    help="seeds A, C_here and the variants train on (default: the corpus's "
                         "score seeds); other seeds replicate A on fresh runs, against B to E "
                         "scored on the corpus's runs")
    ap.add_argument("--variant", action="append", default=[],
                    metavar="NAME:KEY=VALUE,...",
                    help=f"also A with stricter settings, as column A_NAME (repeatable): "
                         f"min_gain (the guard's margin over the control arm, A's "
                         f"--guard-margin), guard_steps (its trial, A's "
                         f"{Variant.guard_steps}), level (the rewrite proposer's interval, "
                         f"A's {Variant.level}); e.g. strict:min_gain=0.1. Trained only on "
                         f"the seeds where A rewrote (elsewhere its run is A's)")
    ap.add_argument("--only", metavar="FILE", type=existing_file,
                    help="evaluate only the problems this file names, one per line (each "
                         "still held out with its whole group; the proposers still learn "
                         "from every other group)")
    ap.add_argument("--no-shortcut", action="store_true",
                    help="train C_here and the variants on every seed, also where A applied "
                         "no rewrite (their runs are then A's: this checks it)")
    ap.add_argument("--resume", action="store_true",
                    help="go on from the groups --rows-out holds (a run stopped part-way)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="processes sharing the held-out groups (default 1)")
    ap.add_argument("--shard", type=parse_shard, metavar="I/N",
                    help="evaluate only the I-th of N shares of the held-out groups (0-based; "
                         "with --rows-out), e.g. to spread the run over machines")
    ap.add_argument("--rows-out", metavar="CSV", help="also write the per-problem rows there")
    ap.add_argument("--from-rows", nargs="+", metavar="CSV", type=existing_file,
                    help="report the rows that --rows-out wrote (every share) instead of "
                         "evaluating; still needs the run's --warehouse (or --pack and "
                         "--history): the report states its default, seed halves and history")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write-results", action="store_true",
                    help="replace this benchmark's section of benchmarks/RESULTS.md")
    args = ap.parse_args()
    if args.guard_margin < 0:
        ap.error(f"--guard-margin {args.guard_margin}: a share of 0 or more")
    try:
        args.variant = [parse_variant(text, a_settings(args)) for text in args.variant]
    except argparse.ArgumentTypeError as err:
        ap.error(f"--variant: {err}")
    if args.pack and not args.history:
        ap.error("--pack holds no rewrite history: name its warehouse with --history DIR")
    if args.shard and not args.rows_out:
        ap.error("--shard needs --rows-out (report the shares together with --from-rows)")
    if args.feedback and (args.shard or args.from_rows or args.resume):
        ap.error("--feedback needs every group's first pass in one process: no --shard, "
                 "no --resume")
    if args.resume and not args.rows_out:
        ap.error("--resume needs --rows-out (the rows of the run it goes on from)")
    t0 = time.perf_counter()
    if args.from_rows:
        df, facts = combined_rows(args)
    else:
        df, facts = evaluate(args)
    if args.rows_out:
        df.to_csv(args.rows_out, index=False)
    text = report(df, facts, args, time.perf_counter() - t0)
    publish(text, args.write_results)
    return 0


if __name__ == "__main__":
    run_main(main)
