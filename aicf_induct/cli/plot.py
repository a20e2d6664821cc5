"""`aicf-induct plot run|compare|correlations|leaderboard`: the dashboard's main figures as
image files (PNG, SVG or PDF, from -o's suffix), drawn with matplotlib (aicf_induct/plots)."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from aicf_induct.cli import options
from aicf_induct.errors import ConfigError

if TYPE_CHECKING:
    import duckdb

LATEST = "latest"  # RUN_ID standing for the run started last
WH_HELP = "warehouse directory (default: $AICF_WAREHOUSE, else ./aicf_warehouse)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("plot", help="draw a run, runs compared, the correlations or a "
                                    "leaderboard to a file",
                       description="Write a figure of the warehouse to an image file: a run's "
                                   "loss with its triggers, decisions, rewrites and rollbacks "
                                   "marked; several runs' losses overlaid; the mined feature × "
                                   "trait correlations; a problem's leaderboard.")
    psub = p.add_subparsers(dest="plot_command", metavar="FIGURE", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="image to write (.png, .svg or .pdf)")
    common.add_argument("--warehouse", default=None, metavar="DIR", type=options.warehouse_dir,
                        help=WH_HELP)
    r = psub.add_parser("run", parents=[common], help="a run's curves and events",
                        description="Training and validation loss (log scale) with a marker "
                                    "per trigger, decision, rewrite and rollback, rolled-back "
                                    "steps shaded; grad norm and update ratio below.",
                        epilog="example: aicf-induct plot run 3f2a... -o run.png")
    r.add_argument("run_id", metavar="RUN_ID",
                   help="the run (`aicf-induct runs` lists them): its id, or the first 6 or "
                        "more characters of it when no other run's id starts so; or `latest`: "
                        "the run started last")
    r.set_defaults(func=plot_run)
    cmp = psub.add_parser("compare", parents=[common], help="several runs' curves overlaid",
                          description="Each run's training loss per step on the path it took "
                                      "and its validation loss per evaluation (dashed), in "
                                      "its own colour (log scale); below, the validation "
                                      "score when the runs share one.",
                          epilog="example: aicf-induct plot compare 3f2a... 9b1c... -o cmp.png")
    cmp.add_argument("run_ids", nargs="+", metavar="RUN",
                     help="2 to 8 runs (`aicf-induct runs` lists them): an id, or its first "
                          "6 or more characters when no other run's id starts so; `latest`: "
                          "the run started last")
    cmp.set_defaults(func=plot_compare)
    c = psub.add_parser("correlations", parents=[common], help="the correlation heatmap",
                        description="The latest `induce fit`'s feature × trait correlations "
                                    "(view `correlations`), or a knowledge pack's (--pack); "
                                    "* marks q <= --fdr.")
    c.add_argument("--fdr", type=options.q_level, default=0.05, metavar="Q",
                   help="q-value to mark (default 0.05)")
    c.add_argument("--pack", nargs="?", const="", default=None, metavar="PACK",
                   help="draw a knowledge pack's correlations instead of the warehouse's "
                        "(PACK left out: $AICF_PACK, else the installed pack)")
    c.add_argument("--top", type=options.non_negative_int, default=20, metavar="N",
                   help="the features and traits of the N most significant correlations "
                        "(default 20; 0: all, which for a corpus is a very large figure)")
    c.set_defaults(func=plot_correlations)
    lb = psub.add_parser("leaderboard", parents=[common], help="a problem's best structures",
                         description="Mean and best score of the problem's best structures "
                                     "(report `leaderboard`).")
    lb.add_argument("problem", metavar="PROBLEM", help="problem name or id")
    lb.add_argument("--top", type=options.positive_int, default=10, metavar="N",
                    help="structures shown (default 10)")
    lb.set_defaults(func=plot_leaderboard)


def _root(path: str | None, output: str) -> Path:
    import warehouse
    from aicf_induct.plots.save import check_output

    check_output(output)  # a bad -o fails before any reading

    return warehouse.existing_warehouse(path)


def _done(path: Path, what: str) -> int:
    print(f"wrote {path} ({what})")
    return 0


def plot_run(args: argparse.Namespace) -> int:
    import warehouse
    from aicf_induct.plots import run_figure, save_figure
    from warehouse.run_view import RunView, run_view

    root = _root(args.warehouse, args.output)

    def read(c: duckdb.DuckDBPyConnection) -> tuple[int, RunView | None, int]:
        run_id, matches = _run_id(c, args.run_id)
        if matches != 1:
            return matches, None, 0
        return matches, run_view(c, run_id), _not_finite(c, run_id)

    matches, view, not_finite = warehouse.with_retry(root, read)
    _check_found("RUN_ID", args.run_id, matches, root)
    if view is None:  # gone between the two reads
        raise ConfigError(f"RUN_ID: no run '{args.run_id}' in {root}")
    path = save_figure(run_figure(view), args.output)
    marks = len(view.marked_events())
    plural = "" if view.live_steps == 1 else "s"
    steps = f"{view.live_steps} steps on the path taken ({view.logged_steps} logged)" \
        if view.discarded_steps else f"{view.live_steps} step{plural}"
    if not_finite:
        steps += f" ({not_finite} with a loss of inf or NaN, shaded)"
    return _done(path, f"run {view.run['run_id']}: {steps}, {marks} events marked")


def _not_finite(conn: duckdb.DuckDBPyConnection, run_id: str) -> int:
    """How many steps on the path the run took logged a loss of inf or NaN."""
    [(n,)] = conn.execute("SELECT count(*) FROM live_steps WHERE run_id = ? AND NOT "
                          "isfinite(loss)", [run_id]).fetchall()
    return int(n)


def _run_id(conn: duckdb.DuckDBPyConnection, given: str) -> tuple[str, int]:
    """`browse.run_by_prefix`, and for `latest` the run started last."""
    from warehouse.browse import list_runs, run_by_prefix

    if given == LATEST:
        newest, _ = list_runs(conn, limit=1)
        return (str(newest[0]["run_id"]), 1) if newest else ("", 0)
    return run_by_prefix(conn, given)


def _check_found(option: str, given: str, matches: int, root: Path) -> None:
    """ConfigError unless `given` named exactly one run (`_run_id`'s count)."""
    if matches == 0 and given == LATEST:
        raise ConfigError(f"{option}: '{LATEST}': {root} holds no runs")
    from warehouse.browse import check_named

    check_named(option, given, matches, root)


def plot_compare(args: argparse.Namespace) -> int:
    import warehouse
    from aicf_induct.plots.compare import compare_figure
    from aicf_induct.plots.save import save_figure
    from warehouse.run_view import COMPARE_RUNS, RunView, run_view

    least, most = COMPARE_RUNS
    given: list[str] = args.run_ids
    if not least <= len(given) <= most:
        raise ConfigError(f"RUN: compare {least} to {most} runs ({len(given)} given)")
    twice = [r for r, n in Counter(given).items() if n > 1]
    if twice:
        raise ConfigError(f"RUN: {_quoted(twice)} given more than once")
    root = _root(args.warehouse, args.output)

    def read(c: duckdb.DuckDBPyConnection
             ) -> tuple[list[str], list[int], list[RunView | None]]:
        found = [_run_id(c, r) for r in given]
        ids, matches = [r for r, _ in found], [n for _, n in found]
        return ids, matches, [run_view(c, r) if n == 1 else None for r, n in found]

    ids, matches, views = warehouse.with_retry(root, read)
    for g, n in zip(given, matches, strict=True):
        if n > 1 or (g == LATEST and n == 0):
            _check_found("RUN", g, n, root)
    missing = [g for g, v in zip(given, views, strict=True) if v is None]
    if missing:
        raise ConfigError(f"RUN: no run {_quoted(missing)} in {root}")
    if len(set(ids)) < len(ids):  # `latest` and the id of the run started last
        same = [g for g, r in zip(given, ids, strict=True) if ids.count(r) > 1]
        raise ConfigError(f"RUN: {_quoted(same, ' and ')} are the same run")
    found = [v for v in views if v is not None]
    path = save_figure(compare_figure(found), args.output)
    return _done(path, f"{len(found)} runs: {', '.join(ids)}")


def _quoted(values: list[str], sep: str = ", ") -> str:
    return sep.join(f"'{v}'" for v in values)


def plot_correlations(args: argparse.Namespace) -> int:
    import warehouse
    from aicf_induct.plots import correlation_figure, save_figure
    from aicf_induct.plots.reports import most_significant
    from warehouse.browse import mined

    if args.pack is not None:
        if args.warehouse is not None:
            raise ConfigError("--pack and --warehouse: draw one of them")
        from aicf_induct.induction.pack import load_pack
        from aicf_induct.plots.save import check_output

        check_output(args.output)
        pack = load_pack(args.pack or None)
        rows = [{str(k): v for k, v in r.items()}
                for r in pack.correlations.to_dict("records")]
        where = f"pack {pack.path}"
        if not rows:
            raise _none_mined(where, len(pack.rules))
    else:
        root = _root(args.warehouse, args.output)
        rows, rules = warehouse.with_retry(
            root, lambda c: (mined(c, "correlations"), mined(c, "rules")))
        where = str(root)
        if not rows and not rules:
            raise ConfigError(f"no correlations in {root}: mine them with `aicf-induct induce "
                              f"fit --warehouse {root}`, or draw the pack's (--pack)")
        if not rows:
            raise _none_mined(where, len(rules))
    shown = most_significant(rows, args.top)
    path = save_figure(correlation_figure(shown, args.fdr), args.output)
    marked = sum(r["q_value"] is not None and r["q_value"] <= args.fdr for r in shown)
    of = f" of {len(rows)}" if len(shown) < len(rows) else ""
    return _done(path, f"{len(shown)} correlations{of} from {where}, {marked} with q <= "
                       f"{args.fdr:g}")


def _none_mined(where: str, rules: int) -> ConfigError:
    """A fit that mined rules but no correlation (too few problems for one to pass): no
    figure to draw, said alike for a warehouse and a pack."""
    return ConfigError(f"no correlations to draw: {where} holds none, as mined (its fit found "
                       f"{rules} rule{'' if rules == 1 else 's'} and no correlation)")


def plot_leaderboard(args: argparse.Namespace) -> int:
    import warehouse
    from aicf_induct.plots import leaderboard_figure, save_figure

    root = _root(args.warehouse, args.output)
    board = warehouse.with_retry(root, lambda c: warehouse.run_report(
        c, "leaderboard", {"problem": args.problem, "top": args.top}))
    if board.empty:
        raise ConfigError(f"no scored runs of '{args.problem}' in {root}")
    path = save_figure(leaderboard_figure(board, args.problem), args.output)
    return _done(path, f"{len(board)} structures")
