"""`aicf-induct adapt`: adaptive training. The model's structure changes while it trains
(triggers → policy → live rewrite → guard, rollback on harm or instability); every event
is logged with the metrics before and after, and the IR after every rewrite."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from aicf_induct.cli import from_proposal, options
from aicf_induct.cli.json_out import json_text
from aicf_induct.cli.resume import RESUME_TAKES, fork_dir, logged_rows, resume_dir
from aicf_induct.cli.timeline import Timeline
from aicf_induct.cli.train import (
    add_log_options,
    add_parallel_options,
    add_train_options,
    close_log,
    dataset,
    model_graph,
    note_idle_ranks,
    open_recorder,
    parallel_setup,
    print_metrics,
    train_config,
    tuning_store,
)
from aicf_induct.errors import ConfigError
from aicf_induct.interrupts import sigterm_interrupts
from aicf_induct.ir.graph import Graph
from aicf_induct.progress import is_terminal, transient
from aicf_induct.records import (
    BaseRecorder,
    FanoutRecorder,
    Recorder,
    StepBatch,
    StepRecord,
)
from aicf_induct.runtime import snapshot as disk
from aicf_induct.runtime.adaptive import (
    AdaptConfig,
    AdaptiveRun,
    FaultInjection,
    StepHook,
    adaptive_config,
    checkpoint_policy,
    claim_checkpoint_dir,
)
from aicf_induct.runtime.guard import GUARDS, GuardConfig
from aicf_induct.runtime.parallel import Communicator, DataParallel
from aicf_induct.runtime.policies import POLICIES, Policy, make_policy
from aicf_induct.runtime.trainer import TrainConfig, check_trainable
from aicf_induct.words import counted

START_MODEL = "mlp:depth=1,width=4"  # without --from-proposal: small on purpose
RUN_FAILED = 4  # exit status: the run ended `failed` (its results are printed all the same)
def add_adapt_options(p: argparse.ArgumentParser) -> None:
    d, g = AdaptConfig(), GuardConfig()
    a = p.add_argument_group("adaptation")
    a.add_argument("--policy", default=None, choices=POLICIES,
                   help="what to do at a trigger (default rules; with --from-proposal the "
                        "fallback of the learned rewrite proposer; with --resume the "
                        "checkpoint's)")
    a.add_argument("--steps", type=options.positive_int, default=d.steps,
                   help=f"optimizer steps of the run (default {d.steps})")
    a.add_argument("--trigger-warmup", type=options.non_negative_int, default=d.warmup_steps,
                   metavar="N",
                   help=f"the warm-up trigger fires after N steps, 0: never "
                        f"(default {d.warmup_steps})")
    a.add_argument("--trigger-epochs", type=options.non_negative_int, default=d.epoch_trigger,
                   metavar="K",
                   help="fire at the end of every K-th epoch (default 0: never)")
    a.add_argument("--eval-every", type=options.non_negative_int, default=d.eval_every, metavar="N",
                   help="steps between validation evaluations (default 0: each epoch)")
    a.add_argument("--plateau-patience", type=options.positive_int, default=d.plateau_patience,
                   help=f"evaluations without improvement (default {d.plateau_patience})")
    a.add_argument("--plateau-min-delta", type=options.non_negative_float,
                   default=d.plateau_min_delta,
                   help=f"relative improvement that counts (default {d.plateau_min_delta})")
    a.add_argument("--guard-steps", type=options.positive_int, default=g.steps,
                   help=f"steps the guard watches after a rewrite (default {g.steps})")
    a.add_argument("--guard", choices=GUARDS,
                   help="what a rewrite is judged against after its trial: level, the losses "
                        "before it; counterfactual, the same run continued without it over "
                        "the same batches (a control arm: the trial's steps cost twice, and "
                        "a rewrite is kept only if it beats it on validation). Default: "
                        "counterfactual with --from-proposal, else level")
    a.add_argument("--guard-margin", type=options.non_negative_float, default=g.min_gain,
                   metavar="F",
                   help=f"the counterfactual guard keeps a rewrite only if its validation loss "
                        f"is below the control arm's by more than this fraction (default "
                        f"{g.min_gain}: kept with smaller gains, the main job's learned "
                        f"rewrites cost test accuracy)")
    a.add_argument("--max-rewrites", type=options.non_negative_int, default=d.max_rewrites,
                   help=f"(default {d.max_rewrites})")
    a.add_argument("--checkpoint-dir", metavar="DIR",
                   help="write checkpoints there (created if need be; not one holding "
                        "another run's; atomic; the last two are kept)")
    a.add_argument("--checkpoint-steps", type=options.positive_int, default=d.checkpoint_steps,
                   metavar="N",
                   help=f"executed steps between checkpoints, taken at the first step outside "
                        f"a rewrite's trial (default {d.checkpoint_steps})")
    a.add_argument("--resume", metavar="DIR",
                   help="go on from the latest checkpoint in DIR (or that checkpoint itself): "
                        "its model, recipe, settings, length and policy apply, and the "
                        "options that set them are refused; a damaged one gives way to the "
                        "one before it; --dataset must name the same dataset; the run must "
                        "be in the warehouse logged to (or --no-log)")
    a.add_argument("--fork", metavar="DIR",
                   help="branch a new run from the final state an ended run left in its "
                        "checkpoint directory DIR (its best model, at its last step; a run "
                        "leaves one when it ends completed or early-stopped): its model, "
                        "recipe and settings apply; --steps (needed) sets the branch's steps "
                        "in all, more than the run took; --policy, --max-rewrites, "
                        "--checkpoint-dir and --checkpoint-steps are the branch's own, and so "
                        "are its rewrite and rollback counts (from 0); the branch is logged as "
                        "a run of its own, naming its parent")
    a.add_argument("--inject-nan", type=options.non_negative_int, metavar="STEP",
                   help="(testing) set a parameter to NaN before executed step STEP")
    a.add_argument("--inject-spike", type=options.non_negative_int, metavar="STEP",
                   help="(testing) scale every parameter by 1000 before executed step STEP "
                        "(the model blows up: a spike the loop rolls back)")


def resumed_policy(args: argparse.Namespace) -> Policy | None:
    """The policy `--resume` goes on with: `--policy`'s, the learned one of a --from-proposal
    run rebuilt from its checkpoint (its proposer as it was at the run's start), else None
    (the checkpoint's built-in one)."""
    if args.policy:
        return named_policy(args, args.policy)
    name, settings = checkpoint_policy(args.resume)
    if name == "learned" and settings is not None:
        from aicf_induct.induction.mainjob import learned_policy

        return learned_policy(settings, stream=sys.stderr)
    return None


def guard_mode(args: argparse.Namespace) -> str:
    """--guard, or its default: counterfactual for the main job (as its benchmark measures
    it), level for the rule policy's runs (as "Live rewriting" measures them)."""
    return args.guard or ("counterfactual" if getattr(args, "from_proposal", False)
                          else "level")


def adapt_config(args: argparse.Namespace) -> AdaptConfig:
    return AdaptConfig(steps=args.steps, warmup_steps=args.trigger_warmup,
                       epoch_trigger=args.trigger_epochs, eval_every=args.eval_every,
                       plateau_patience=args.plateau_patience,
                       plateau_min_delta=args.plateau_min_delta,
                       guard=GuardConfig(steps=args.guard_steps, min_gain=args.guard_margin,
                                         counterfactual=guard_mode(args) == "counterfactual"),
                       max_rewrites=args.max_rewrites, early_stop=args.patience,
                       checkpoint_steps=args.checkpoint_steps)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "adapt", help="train while rewriting the model's structure (live rewrites)",
        description="Adaptive training: triggers (warm-up, epoch end, plateau, instability) "
                    "ask a policy for a rewrite of the running model (widen, deepen, "
                    "residual, normalize, activation, prune, dropout, add_block, add_heads, "
                    "widen_tokens: docs/rewrites.md); parameters and "
                    "optimizer state carry over; a guard rolls back rewrites that hurt; NaN "
                    "and loss spikes roll back with a learning-rate back-off. Every event "
                    "and the IR after every rewrite are logged. Exit status "
                    f"{RUN_FAILED} when the run ends failed (more rollbacks than allowed).",
        epilog="example: aicf-induct adapt --dataset digits --model mlp:depth=1,width=4 "
               "--policy rules --steps 3000",
    )
    p.add_argument("--dataset", required=True, help="dataset name (see `train --help`)")
    p.add_argument("--model", default=None, type=options.model_spec,
                   help=f'starting model spec (default "{START_MODEL}": small on purpose)')
    add_train_options(p, epochs=False)  # an adaptive run's length is --steps
    _help(p, "patience", f"early stopping: validation evaluations (each epoch, or every "
                         f"--eval-every steps) without a new best, 0 to disable (default "
                         f"{TrainConfig().patience}, as train's)")
    _help(p, "seed", f"seed for the data split, initialisation, batch order and dropout "
                     f"(default {TrainConfig().seed})")
    add_adapt_options(p)
    add_parallel_options(p)
    from_proposal.add_options(p)
    add_log_options(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON, no timeline")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (one shows only when stderr is a terminal and the "
                        "timeline is not on it: with --json, or stdout redirected)")
    options.record_given([a for a in p._actions
                          if a.option_strings and a.dest not in RESUME_TAKES])
    p.set_defaults(func=run)


def _help(p: argparse.ArgumentParser, dest: str, text: str) -> None:
    """Say what a shared option means for adapt (argparse has no public way to)."""
    for a in p._actions:
        if a.dest == dest:
            a.help = text


class StepBar(BaseRecorder):
    """adapt's progress bar over the run's optimizer steps, on stderr (drawn only when it is a
    terminal: `progress.transient`); a rollback moves it back. Nothing is drawn before
    `start`, which the command calls once it knows the run's length."""

    keeps_problems = False  # it takes no problem rows: none are computed for it

    def __init__(self) -> None:
        self.bar: Any = None

    def start(self, desc: str, total: int) -> None:
        self.bar = transient(total=total, desc=desc, unit="step")

    def step(self, rec: StepRecord) -> None:
        self._at(rec.step + 1)

    def step_batch(self, batch: StepBatch) -> None:  # a GPU epoch's steps: its last counts
        if len(batch):
            self._at(int(batch.step[-1]) + 1)

    def _at(self, done: int) -> None:
        if self.bar is not None:
            self.bar.update(done - self.bar.n)  # tqdm takes a negative update (a rollback)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _step_bar(args: argparse.Namespace, timeline: Timeline | None) -> StepBar | None:
    """The bar, unless --quiet, or the timeline is printed to a terminal: there it is the
    run's progress, and a bar redrawn on the same screen would break its lines."""
    if args.quiet or (timeline is not None and is_terminal(sys.stdout)):
        return None
    return StepBar()


def _describe(graph: Graph) -> str:
    widths = [int(n.attrs["out_features"]) for n in graph.nodes
              if n.op == "linear" and n.id not in graph.outputs]
    ops = sorted({n.op for n in graph.nodes if n.op in ("layernorm", "batchnorm", "dropout",
                                                        "add")})
    extra = f", with {', '.join(ops)}" if ops else ""
    return f"hidden widths {widths}{extra}, {graph.param_count()} parameters"


def _proposal_head(plan: from_proposal.Plan) -> str:
    r = plan.start.record
    low, high = r["interval"]
    near = ", ".join(str(n) for n in r["neighbors"])
    return (f"proposal #{r['rank']} from {plan.source}: {r['structure_key']}\n"
            f"  expected normalized error {r['expected_norm_error']:.3f} "
            f"[{low:.3f}, {high:.3f}]; nearest corpus problems: {near or '-'}\n"
            f"  rewrites: {plan.policy.name} proposer ({plan.policy.source}), "
            f"fallback {plan.policy.fallback.name}")


def run(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as held:  # the checkpoint directory, for the command's life
        return _run(args, held)


def named_policy(args: argparse.Namespace, name: str) -> Policy:
    """The built-in policy `name`; explore's draws seeded by the run's --seed (else every
    seed's run would draw the same arms at the same steps)."""
    return make_policy(name, {"seed": args.seed} if name == "explore" else None)


def _run(args: argparse.Namespace, held: contextlib.ExitStack) -> int:
    from aicf_induct.problems.registry import load_problem  # here, not for `--help`

    hooks: list[StepHook] = []
    if args.inject_nan is not None:
        hooks.append(FaultInjection(args.inject_nan, "nan"))
    if args.inject_spike is not None:
        hooks.append(FaultInjection(args.inject_spike, "spike"))
    from_proposal.check(args)
    policy = named_policy(args, args.policy or "rules")
    model = args.model or START_MODEL
    extra: dict[str, Any] = {"model": model}
    # everything that can refuse the command comes before the warehouse is opened
    parallel = bool(args.gpus or (args.ranks and args.ranks > 1))
    logged: tuple[dict[str, int], list[int]] | None = None
    going_on = "--resume" if args.resume else "--fork" if args.fork else None
    if going_on and parallel:
        raise ConfigError(f"{going_on} goes on with one rank: drop --gpus/--ranks")
    if args.resume:
        args.resume = resume_dir(args)
        # before the log's counts are read: another process may be logging the run still
        held.callback(disk.hold(args.resume))
        logged = logged_rows(args)
    elif args.fork:
        args.fork = fork_dir(args)
    else:
        ranks, gpus, config = parallel_setup(args, train_config(args))
        if gpus:  # before the header: a machine without one is refused in one line
            from aicf_induct.runtime.ranks import check_gpus

            check_gpus(ranks)
        adapt = adapt_config(args)
        problem = load_problem(args.dataset, seed=args.seed)
        if args.from_proposal:
            plan = from_proposal.plan(args, problem, config, policy)
            graph, config, policy, model = plan.start.graph, plan.config, plan.policy, \
                plan.start.model
            extra = plan.extra_config
        else:
            graph = model_graph(problem, model, None)
        # refused before the header says what would train (the trainer checks it again),
        # with the run's length in steps (its schedule's warm-up must be shorter)
        check_trainable(problem, graph, adaptive_config(config, adapt, len(problem.train)),
                        f"model {model}")
    recorder, where = _open_log(args, held)
    timeline = Timeline() if not args.json else None
    bar = _step_bar(args, timeline)
    shown = [r for r in (timeline, bar) if r is not None]
    rec: Recorder = FanoutRecorder(recorder, *shown) if shown else recorder
    try:
        with sigterm_interrupts():  # kill, a scheduler: like Ctrl-C, the run ends logged
            try:
                if args.resume:
                    # the checkpoint's policy and settings; its seed gives the split
                    adaptive = AdaptiveRun.resume(
                        args.resume, lambda seed: load_problem(args.dataset, seed=seed),
                        resumed_policy(args), recorder=rec,
                        hooks=hooks, tuning=tuning_store(where),
                        logged=logged[0] if logged else None,
                        resumed_at=logged[1] if logged else ())
                    for why in adaptive.resumed_past:
                        print(f"note: {why}; set aside, going on from the checkpoint before it",
                              file=sys.stderr)
                    problem, policy = adaptive.problem, adaptive.policy
                    head = f"resuming run {adaptive.run_id} at step {adaptive.trainer.step_count}"
                    steps = adaptive.adapt.steps
                elif args.fork:
                    adaptive = AdaptiveRun.branch(
                        args.fork, lambda seed: load_problem(args.dataset, seed=seed),
                        args.steps,
                        policy=named_policy(args, args.policy) if args.policy else None,
                        recorder=rec, hooks=hooks, checkpoint_dir=args.checkpoint_dir,
                        checkpoint_steps=args.checkpoint_steps
                        if "--checkpoint-steps" in options.given_options(args) else None,
                        max_rewrites=args.max_rewrites
                        if "--max-rewrites" in options.given_options(args) else None,
                        tuning=tuning_store(where))
                    problem, policy = adaptive.problem, adaptive.policy
                    head = (f"branching from run {adaptive.trainer.parent_run_id} at step "
                            f"{adaptive.trainer.step_count}: {_describe(adaptive.trainer.graph)}")
                    steps = adaptive.adapt.steps
                else:
                    steps = adapt.steps
                    if parallel:
                        extra["data_parallel"] = {"ranks": ranks, "gpus": gpus}
                        note_idle_ranks(ranks, config.batch_size, graph)

                    def start(comm: Communicator | None) -> AdaptiveRun:
                        return AdaptiveRun(problem, graph, config, adapt, policy, recorder=rec,
                                           checkpoint_dir=args.checkpoint_dir, hooks=hooks,
                                           extra_config=extra, tuning=tuning_store(where),
                                           parallel=None if comm is None else DataParallel(comm))

                    head = f"start {model}: {_describe(graph)}"
                    if args.from_proposal:
                        head = _proposal_head(plan) + "\n" + head
                if timeline:  # a reader gone already (`| head -1`) must not stop the run
                    timeline.line(
                        f"adapt {problem.name}: {problem.task}, "
                        f"{counted(problem.n_rows, 'row')}, "
                        f"{counted(problem.n_features, 'feature')}; policy {policy.name}, "
                        f"{counted(steps, 'step')}"
                        + (f", data parallel over {ranks} {'GPUs' if gpus else 'processes'}"
                           if parallel else ""))
                    timeline.line(head)
                if bar is not None:
                    bar.start(f"adapt {problem.name}", steps)
                if going_on:
                    result = adaptive.run()
                elif parallel:
                    from aicf_induct.runtime.ranks import run_ranks

                    result = run_ranks(ranks, lambda comm: start(comm).run(), adapt_other_rank,
                                       (args, graph, config, adapt, hooks, where), gpus=gpus)
                else:
                    result = start(None).run()
            except BaseException:
                rec.close()
                raise
    except KeyboardInterrupt:
        directory = args.resume or args.checkpoint_dir
        if not (directory and disk.latest(directory)):
            raise
        if checkpoint_policy(directory) == ("learned", None):  # asked a service: NOT_RESUMABLE
            print("interrupted; a run deciding with the service's rewrite proposer "
                  "(--from-proposal --service) cannot be resumed: run it again",
                  file=sys.stderr)
            return 130
        print(f"interrupted; go on with: aicf-induct adapt --dataset {args.dataset} "
              f"--resume {directory}", file=sys.stderr)
        return 130
    line, status, log_error = close_log(rec, recorder, where)
    if args.json:
        print(json_text(result.as_dict(), indent=1))  # what Python callers get from as_dict
    else:
        print(f"run {result.run_id} {result.status} after {counted(result.steps, 'step')} "
              f"({result.work} executed), {counted(result.rewrites, 'rewrite')}, "
              f"{counted(result.rollbacks, 'rollback')}, {result.wall_time_s:.2f} s")
        print(f"best model (step {result.best_step}): {_describe(result.graph)}")
        print_metrics(result.metrics)
        if line:
            print(line)
    if log_error is not None:  # after the run's results: why its log is incomplete
        raise log_error
    # a script tells a failed run from success (one logged in part too: it failed)
    return RUN_FAILED if result.status == "failed" else status


def _open_log(args: argparse.Namespace,
              held: contextlib.ExitStack) -> tuple[Recorder, str | None]:
    """The run's log (`open_recorder`, or the service's), after checking --checkpoint-dir
    (here, not at the first checkpoint, mid-run) and holding it for the command (`held`):
    the last refusals before the run starts. The folders the check created for a run
    refused here are taken back."""
    made = _missing_dirs(args.checkpoint_dir) if args.checkpoint_dir is not None else []
    let_go = None
    try:
        if args.checkpoint_dir is not None:
            why, let_go = claim_checkpoint_dir(args.checkpoint_dir)
            if why:
                raise ConfigError(f"--checkpoint-dir {args.checkpoint_dir}: {why}")
        opened = from_proposal.service_recorder(args) or open_recorder(args)
        if let_go is not None:
            held.callback(let_go)
        return opened
    except BaseException:
        if let_go is not None:
            let_go()  # (its lock file goes with it, before the folders)
        for folder in made:  # deepest first; one that holds anything stays
            try:
                folder.rmdir()
            except OSError:
                break
        raise


def _missing_dirs(path: str) -> list[Path]:
    """The folders of `path` (itself included) that do not exist yet, deepest first."""
    missing, folder = [], Path(path).absolute()
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def adapt_other_rank(comm: Communicator, payload: tuple[Any, ...]) -> None:
    """A data-parallel rank other than 0 (its own process): rank 0's starting graph and
    recipe, its share of every batch; it takes rank 0's measurements and decisions, logs
    nothing and writes no checkpoint."""
    args, graph, config, adapt, hooks, where = payload
    problem = dataset(args)
    AdaptiveRun(problem, graph, config, adapt, named_policy(args, args.policy or "rules"),
                hooks=hooks, checkpoint_dir=args.checkpoint_dir, tuning=tuning_store(where),
                parallel=DataParallel(comm)).run()
