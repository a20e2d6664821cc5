"""Where a benchmark reads the corpus from: a warehouse, or a knowledge pack's per-seed lists
(the same meta-dataset, so a fresh clone reruns the benchmarks without training a corpus)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from aicf_induct.induction.corpus import corpus_meta
from aicf_induct.induction.meta_dataset import load_meta_dataset
from aicf_induct.induction.pack import DEFAULT_PACK, load_pack


def add_source_args(ap: argparse.ArgumentParser) -> argparse._MutuallyExclusiveGroup:
    """--warehouse or --pack (one of them required; the group returned, for a script with
    another way in), --protocol and --seeds."""
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--warehouse", help="warehouse holding the sweep corpus")
    src.add_argument("--pack", nargs="?", const=str(DEFAULT_PACK), metavar="PACK",
                     help="read the corpus from a knowledge pack's per-seed scores instead "
                          "(no PACK: the shipped one)")
    ap.add_argument("--protocol", help="sweep protocol to read (when the warehouse holds "
                                       "several)")
    ap.add_argument("--seeds", type=int, metavar="N",
                    help="read only the corpus's seeds 0..N-1 (default: all; for a corpus "
                         "whose further seeds are still being trained)")
    return src


def load_corpus(args: argparse.Namespace, groups: str | None = None) -> pd.DataFrame:
    """The per-seed meta-dataset named by `add_source_args`'s options; `groups`: a JSON
    file mapping problem name or id to group (default: the corpus's groups)."""
    explicit = json.loads(Path(groups).read_text()) if groups else None
    if args.pack:
        meta = load_pack(args.pack).seed_meta(args.seeds)
        if explicit:
            by_name = meta["problem"].map(explicit)
            meta["group"] = by_name.fillna(meta["problem_id"].map(explicit)) \
                .fillna(meta["group"]).astype(str)
        return meta
    if explicit:
        return load_meta_dataset(args.warehouse, protocol=args.protocol, groups=explicit,
                                 n_seeds=args.seeds)
    meta, _ = corpus_meta(args.warehouse, args.protocol, n_seeds=args.seeds)
    return meta
