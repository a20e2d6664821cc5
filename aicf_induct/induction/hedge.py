"""A proposer's top k chosen as a set, hedged against its own errors.

The proposer orders candidates by their expected error on the new problem, one at a time:
its second and third may be near copies of its first (a wider twin, the same recipe), which
fail on the same problems. Trained together and picked by validation, a set is worth the
best of its members, so a member is worth what it adds where the others fail. Which
candidates fail together the training problems say: the two-way centred matrix of their
normalized errors, `R[p, c] = E[p, c] − mean_p − mean_c + mean` (how much worse than its
usual a candidate did on problem p, beyond p being hard). A candidate's error on the new
problem is modelled as its predicted level plus `shrink` × one training problem's deviation,
and the set's worth as the mean over the training problems of its best member's. The first
slot stays the proposer's first; each next one is the candidate that most lowers that mean
(the greedy portfolio of auto-sklearn 2.0, on the problem's predicted levels instead of the
corpus's average ones). `shrink` 0 gives back the proposer's order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from aicf_induct.errors import ConfigError


def centred(errors: pd.DataFrame) -> pd.DataFrame:
    """The two-way centred errors (problems × candidates; a missing one counts as 1, as the
    baselines count it)."""
    E = errors.astype(float).fillna(1.0).clip(upper=1.0)
    return E.sub(E.mean(axis=1), axis=0).sub(E.mean(axis=0), axis=1) + float(E.to_numpy().mean())


def hedged(order: Sequence[str], level: pd.Series, errors: pd.DataFrame, n: int,
           shrink: float) -> list[str]:
    """`order` (the proposer's, best first) with its first `n` re-chosen as a set: slot 1
    unchanged, each next the candidate of `order` that most lowers the expected best error
    of the set (`level`: each candidate's predicted error; `errors`: the training problems'
    normalized errors, candidates as columns); the rest in `order`'s order."""
    if not shrink >= 0.0:
        raise ConfigError(f"hedge shrink must be >= 0, got {shrink}")
    order = [str(c) for c in order]
    if shrink == 0.0 or n <= 1 or len(order) <= 1:
        return order
    missing = [c for c in order if c not in errors.columns or c not in level.index]
    if missing:
        raise ConfigError(f"candidate {missing[0]} has no training errors or no level")
    R = centred(errors[order]).to_numpy(float)
    M = level.reindex(order).to_numpy(float)[None, :] + shrink * R
    chosen = [0]
    best = M[:, 0].copy()
    for _ in range(min(n, len(order)) - 1):
        worth = np.minimum(best[:, None], M).mean(axis=0)
        worth[chosen] = np.inf
        c = int(np.argmin(worth))  # ties: the earlier in the proposer's order
        chosen.append(c)
        best = np.minimum(best, M[:, c])
    head = [order[i] for i in chosen]
    return head + [c for c in order if c not in set(head)]
