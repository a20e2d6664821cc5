"""A knowledge pack's corpus grown by a warehouse's problems (`induce fit --pack P --warehouse
W`): the user's own tables, swept as the corpus was, added to the corpus the pack ships.

The two meta-datasets join as they are (a meta-dataset normalizes each problem's errors
within the problem, so neither side's scale moves the other's), after what makes them one
corpus is checked:

- **the protocol**: W's sweeps must be trained as the pack's corpus was (`corpus build`'s
  settings: the protocol hash of its training settings; a pack's provenance records it, and a
  pack built before it did is of `corpus build`'s defaults, as the shipped one is);
- **the candidates**: W's problems are swept over the pack's candidates, each of them on each
  of the pack's seeds (a problem short of any, a sweep still under way, is left out and
  named; `--seeds N` reads fewer seeds of both);
- **the meta-features**: the same set (a pack or warehouse of an older featurizer lacks
  some: `--add-features` computes them for every problem).

A problem in both is W's: its runs replace the pack's (said once). The near-duplicate groups
are drawn again over all the problems, so a table of W that copies a corpus table is grouped
with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from aicf_induct.errors import ConfigError
from aicf_induct.induction.corpus import corpus_protocol
from aicf_induct.induction.meta_dataset import (
    complete_problems,
    feature_columns,
    load_meta_dataset,
    pattern_columns,
    sweep_protocols,
)
from aicf_induct.words import counted


@dataclass
class Grown:
    meta: pd.DataFrame  # the pack's corpus and W's problems, one meta-dataset (ungrouped)
    added: list[str] = field(default_factory=list)  # W's problems taken
    replaced: list[str] = field(default_factory=list)  # of them, those the pack held too
    partial: list[str] = field(default_factory=list)  # W's problems left out: not swept whole


def grow(pack_meta: pd.DataFrame, pack_protocol: str | None, root: str | Path,
         protocol: str | None = None, n_seeds: int | None = None) -> Grown:
    """The pack's per-seed corpus (`Pack.seed_meta`) and the warehouse's problems as one
    meta-dataset, after the checks of the module docstring (each a ConfigError naming what
    differs). `pack_protocol`: the pack's (None: an older pack's, `corpus build`'s default);
    `protocol`: which of the warehouse's sweeps to read (None: the pack's)."""
    want = pack_protocol or corpus_protocol()
    found = sweep_protocols(root)
    chosen = protocol or want
    if chosen != want:
        raise ConfigError(f"--protocol {chosen}: the pack's corpus was swept under protocol "
                          f"{want}; a corpus grows only by problems swept the same way")
    if chosen not in found:
        seen = ", ".join(f"{p} ({counted(n, 'run')})" for p, n in found.items()) or "none"
        raise ConfigError(f"{root} holds no sweep under the pack's protocol {want} (found: "
                          f"{seen}): sweep the problems as the corpus was, `aicf-induct corpus "
                          f"build --problems ... --seeds {_seed_count(pack_meta)} --warehouse "
                          f"{root}` with the corpus's --epochs and --patience (the defaults, "
                          "for the shipped pack)")
    # the pack's seeds at most (seeds past them would set a problem's scale on more runs)
    seeds = int(pack_meta["seed"].max()) + 1
    mine = load_meta_dataset(root, protocol=chosen,
                             n_seeds=seeds if n_seeds is None else min(n_seeds, seeds))
    _same_candidates(pack_meta, mine, root)
    _same_features(pack_meta, mine, root)
    # a candidate's patterns as the pack holds them (the same structures: a pattern the IR
    # of another version counts otherwise must not split one candidate in two)
    pats = pattern_columns(pack_meta)
    mine = mine.drop(columns=pattern_columns(mine)).merge(
        pack_meta.drop_duplicates("candidate")[["candidate", *pats]], on="candidate")
    whole, partial = _swept_whole(pack_meta, mine)
    if whole.empty:
        raise ConfigError(f"no problem of {root} is swept over every candidate and seed of "
                          f"the pack ({', '.join(partial[:5])}{' ...' if len(partial) > 5 else ''}"
                          f"): finish the sweep, or read fewer seeds (--seeds N)")
    added = sorted(whole["problem"].astype(str).unique())
    replaced = sorted(set(whole["problem_id"]) & set(pack_meta["problem_id"]))
    kept = pack_meta[~pack_meta["problem_id"].isin(replaced)]
    # (a feature undefined for W's problems' tasks, as `_same_features` allows, is NaN)
    meta = pd.concat([kept, whole.reindex(columns=kept.columns)], ignore_index=True)
    meta = meta.sort_values(["problem", "candidate", "seed"]).reset_index(drop=True)
    names = dict(zip(whole["problem_id"], whole["problem"].astype(str), strict=False))
    return Grown(meta, added, sorted(names[p] for p in replaced), partial)


def _seed_count(meta: pd.DataFrame) -> int:
    return int(meta["seed"].nunique())


def _same_candidates(pack_meta: pd.DataFrame, mine: pd.DataFrame, root: str | Path) -> None:
    ours = dict(zip(pack_meta["candidate"], pack_meta["structure_key"], strict=False))
    theirs = dict(zip(mine["candidate"], mine["structure_key"], strict=False))
    other = sorted(k for k, v in theirs.items() if ours.get(k) != v)
    if other:
        raise ConfigError(f"{root}'s sweeps train {len(other)} candidate(s) the pack's space "
                          f"lacks (e.g. {theirs[other[0]]}): sweep the corpus's space "
                          "(`corpus build`'s --space default)")


def _same_features(pack_meta: pd.DataFrame, mine: pd.DataFrame, root: str | Path) -> None:
    """The same featurizer on both sides: no feature the pack lacks, and, for each task,
    every feature the pack defines on problems of that task (a feature can be undefined
    for a task: a regression landmark on classification, NaN in the pack too)."""
    ours, theirs = set(feature_columns(pack_meta)), set(feature_columns(mine))
    lacking = sorted(theirs - ours)
    who = "the pack"
    if not lacking:
        who = str(root)
        for task in sorted(mine["task"].unique()):
            defined = pack_meta.loc[pack_meta["task"] == task, sorted(ours)].notna().any()
            lacking += sorted(set(defined.index[defined]) - theirs - set(lacking))
    if lacking:
        raise ConfigError(f"{who} lacks meta-feature {lacking[0].removeprefix('f.')} "
                          f"({len(lacking)} in all) that the other holds (another "
                          "featurizer's): --add-features computes every feature for every "
                          "problem")


def _swept_whole(pack_meta: pd.DataFrame, mine: pd.DataFrame
                 ) -> tuple[pd.DataFrame, list[str]]:
    """W's problems swept over every candidate and seed the pack's corpus has (the pack's
    own rows set the full set: `complete_problems` over both), and the names of the others."""
    both = pd.concat([pack_meta.assign(_mine=False), mine.assign(_mine=True)],
                     ignore_index=True)
    whole, _ = complete_problems(both)
    ok = set(whole.loc[whole["_mine"], "problem_id"])
    keep = mine["problem_id"].isin(ok)
    return (mine[keep].reset_index(drop=True),
            sorted(mine.loc[~keep, "problem"].astype(str).unique()))
