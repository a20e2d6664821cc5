"""Training runtime: backends, executor, parameter store, optimizers, trainer, recorders.

The Python API of training and adaptive training (README.md, docs/rewrites.md):

    from aicf_induct.runtime import AdaptConfig, AdaptiveRun, TrainConfig, Trainer, make_policy
    result = Trainer(problem, graph, TrainConfig(epochs=20), recorder=rec).fit()
    adapted = AdaptiveRun(problem, graph, TrainConfig(), AdaptConfig(steps=2000),
                          make_policy("rules"), recorder=rec).run()

Each name is loaded from its module on first use: importing one module of the package
(`aicf_induct.runtime.snapshot`, as the CLI does) does not import the trainer and the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aicf_induct.lazy_names import lazy_names

# name -> the module of this package that defines it; the TYPE_CHECKING imports below name
# the same (a test holds the two lists equal)
_HOME = {
    # training
    "Trainer": "trainer", "TrainConfig": "trainer", "TrainResult": "trainer",
    # adaptive training
    "AdaptiveRun": "adaptive", "AdaptConfig": "adaptive", "AdaptResult": "adaptive",
    "FaultInjection": "adaptive", "GuardConfig": "guard",
    "Snapshot": "snapshot", "SnapshotError": "snapshot",
    # policies: what to rewrite at a trigger
    "Policy": "policies", "make_policy": "policies", "POLICIES": "policies",
    "Decision": "policies", "PolicyObservation": "policies", "Proposal": "policies",
    "ProposalPolicy": "policies", "RuleBasedPolicy": "policies", "RuleConfig": "policies",
    "TargetSizePolicy": "policies", "StackPolicy": "policies", "ExplorePolicy": "policies",
}

__all__ = sorted(_HOME)


__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())


if TYPE_CHECKING:  # `X as X`: a re-export, for type checkers
    from aicf_induct.runtime.adaptive import AdaptConfig as AdaptConfig
    from aicf_induct.runtime.adaptive import AdaptiveRun as AdaptiveRun
    from aicf_induct.runtime.adaptive import AdaptResult as AdaptResult
    from aicf_induct.runtime.adaptive import FaultInjection as FaultInjection
    from aicf_induct.runtime.guard import GuardConfig as GuardConfig
    from aicf_induct.runtime.policies import POLICIES as POLICIES
    from aicf_induct.runtime.policies import Decision as Decision
    from aicf_induct.runtime.policies import ExplorePolicy as ExplorePolicy
    from aicf_induct.runtime.policies import Policy as Policy
    from aicf_induct.runtime.policies import PolicyObservation as PolicyObservation
    from aicf_induct.runtime.policies import Proposal as Proposal
    from aicf_induct.runtime.policies import ProposalPolicy as ProposalPolicy
    from aicf_induct.runtime.policies import RuleBasedPolicy as RuleBasedPolicy
    from aicf_induct.runtime.policies import RuleConfig as RuleConfig
    from aicf_induct.runtime.policies import StackPolicy as StackPolicy
    from aicf_induct.runtime.policies import TargetSizePolicy as TargetSizePolicy
    from aicf_induct.runtime.policies import make_policy as make_policy
    from aicf_induct.runtime.snapshot import Snapshot as Snapshot
    from aicf_induct.runtime.snapshot import SnapshotError as SnapshotError
    from aicf_induct.runtime.trainer import TrainConfig as TrainConfig
    from aicf_induct.runtime.trainer import Trainer as Trainer
    from aicf_induct.runtime.trainer import TrainResult as TrainResult
