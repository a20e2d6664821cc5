"""The analysis layer's Python API: what the CLI's `corpus`, `induce`, `mine` and `propose`
do, and what the service and the adaptive runtime call (docs/induction.md).

    from aicf_induct.induction import load_pack, propose_dataset
    answer = propose_dataset("wine", load_pack(), top_k=3)   # what `propose --json` prints

Each name is loaded from its module on first use, so importing one module of the package
does not import them all (scikit-learn, the runtime): the modules stay importable one by one
(`aicf_induct.induction.mining`, ...), as the CLI does for its start-up time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aicf_induct.lazy_names import lazy_names

# name -> the module of this package that defines it; the TYPE_CHECKING imports below name
# the same (a test holds the two lists equal)
_HOME = {
    # proposals and the knowledge pack
    "propose_dataset": "proposals", "propose_features": "proposals", "featurise": "proposals",
    "Pack": "pack", "load_pack": "pack", "build_pack": "pack", "write_pack": "pack",
    "Proposer": "proposer", "Proposal": "proposer", "MetaModel": "metamodel",
    # the corpus and its meta-dataset
    "Space": "space", "Candidate": "space", "parse_space": "space_io",
    "SweepSpec": "sweep_spec", "run_sweep": "sweep",
    "corpus_meta": "corpus", "load_meta_dataset": "meta_dataset",
    # mining
    "Miner": "mining", "write_mined": "mined", "rule_replication": "replication",
    # evaluation
    "LopoConfig": "lopo", "run_lopo": "lopo", "run_holdout": "lopo", "split_seeds": "lopo",
    "evaluate_corpus": "evaluate", "evaluate_holdout": "evaluate", "summary": "evaluate",
    "compare": "evaluate", "gap_closed": "evaluate", "calibration": "evaluate",
    # a proposal trained: the top k, the best by validation kept; or the main job, its top
    # candidate trained while the learned rewrite proposer rewrites it (`adapt
    # --from-proposal`)
    "train_shortlist": "shortlist", "StartPoint": "mainjob", "start_point": "mainjob",
    "main_job": "mainjob", "MainJob": "mainjob",
}

__all__ = sorted(_HOME)


__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())


if TYPE_CHECKING:  # `X as X`: a re-export, for type checkers
    from aicf_induct.induction.corpus import corpus_meta as corpus_meta
    from aicf_induct.induction.evaluate import calibration as calibration
    from aicf_induct.induction.evaluate import compare as compare
    from aicf_induct.induction.evaluate import evaluate_corpus as evaluate_corpus
    from aicf_induct.induction.evaluate import evaluate_holdout as evaluate_holdout
    from aicf_induct.induction.evaluate import gap_closed as gap_closed
    from aicf_induct.induction.evaluate import summary as summary
    from aicf_induct.induction.lopo import LopoConfig as LopoConfig
    from aicf_induct.induction.lopo import run_holdout as run_holdout
    from aicf_induct.induction.lopo import run_lopo as run_lopo
    from aicf_induct.induction.lopo import split_seeds as split_seeds
    from aicf_induct.induction.mainjob import MainJob as MainJob
    from aicf_induct.induction.mainjob import StartPoint as StartPoint
    from aicf_induct.induction.mainjob import main_job as main_job
    from aicf_induct.induction.mainjob import start_point as start_point
    from aicf_induct.induction.meta_dataset import load_meta_dataset as load_meta_dataset
    from aicf_induct.induction.metamodel import MetaModel as MetaModel
    from aicf_induct.induction.mined import write_mined as write_mined
    from aicf_induct.induction.mining import Miner as Miner
    from aicf_induct.induction.pack import Pack as Pack
    from aicf_induct.induction.pack import build_pack as build_pack
    from aicf_induct.induction.pack import load_pack as load_pack
    from aicf_induct.induction.pack import write_pack as write_pack
    from aicf_induct.induction.proposals import featurise as featurise
    from aicf_induct.induction.proposals import propose_dataset as propose_dataset
    from aicf_induct.induction.proposals import propose_features as propose_features
    from aicf_induct.induction.proposer import Proposal as Proposal
    from aicf_induct.induction.proposer import Proposer as Proposer
    from aicf_induct.induction.replication import rule_replication as rule_replication
    from aicf_induct.induction.shortlist import train_shortlist as train_shortlist
    from aicf_induct.induction.space import Candidate as Candidate
    from aicf_induct.induction.space import Space as Space
    from aicf_induct.induction.space_io import parse_space as parse_space
    from aicf_induct.induction.sweep import run_sweep as run_sweep
    from aicf_induct.induction.sweep_spec import SweepSpec as SweepSpec
