"""A proposer's top k re-chosen as a set: variants the benchmarks score beside the proposer
(`LopoConfig.sets`), none adopted (`propose` keeps its own order; benchmarks/RESULTS.md).

`hedged`: the set hedged against its own errors. The proposer orders candidates by their
expected error on the new problem, one at a time: its second and third may be near copies of
its first (a wider twin, the same recipe), which fail on the same problems. Trained together
and picked by validation, a set is worth the best of its members, so a member is worth what
it adds where the others fail. Which candidates fail together the training problems say: the
two-way centred matrix of their normalized errors, `R[p, c] = E[p, c] − mean_p − mean_c +
mean` (how much worse than its usual a candidate did on problem p, beyond p being hard). A
candidate's error on the new problem is modelled as its predicted level plus `shrink` × one
training problem's deviation, and the set's worth as the mean over the training problems of
its best member's. The first slot stays the proposer's first; each next one is the candidate
that most lowers that mean (the greedy portfolio of auto-sklearn 2.0, on the problem's
predicted levels instead of the corpus's average ones). `shrink` 0 gives back the proposer's
order.

Other sets were tried the same way (benchmarks/RESULTS.md, "Induction"): `upside`, the
same greedy with the candidates' errors drawn independently from the proposer's intervals
(a set picked by validation is worth its members' spread as well as their levels: expected
improvement, as Bayesian optimisation adds points); `interleaved`, the proposer's order
with kNN's picks (auto-sklearn 1.0's warm start) every third slot, two recommenders'
information in one set; and `tail`, the proposer's first n with kNN's picks after them.
`parse_set_rule` reads their names in `LopoConfig.sets` ("hedge0.5", "upside1", "knnmix",
"knntail3"), `chosen_set` gives a named rule's list.
"""

from __future__ import annotations

import re
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
    return _greedy(order, level.reindex(order).to_numpy(float)[None, :] + shrink * R, n)


def _greedy(order: list[str], M: np.ndarray, n: int) -> list[str]:
    """`order` with its first `n` re-chosen from the scenarios `M` (rows) × candidates
    (`order`'s columns): slot 1 kept, each next the candidate that most lowers the mean over
    the scenarios of the set's best; the rest in `order`'s order."""
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


Z_80 = 1.2815515655446004  # the standard normal's 90 % quantile: an 80 % interval is ±Z_80 sd


def upside(order: Sequence[str], level: pd.Series, low: pd.Series, high: pd.Series, n: int,
           scale: float, draws: int = 2000, seed: int = 0) -> list[str]:
    """`order` with its first `n` re-chosen as a set whose members' errors are independent
    normals: mean `level`, sd `scale` × the 80 % interval's half-width / 1.28 (`low`,
    `high`); the greedy of `hedged` over `draws` fixed draws (deterministic). Slot 1
    unchanged; `scale` 0 gives back `order`."""
    if not scale >= 0.0:
        raise ConfigError(f"upside scale must be >= 0, got {scale}")
    order = [str(c) for c in order]
    if scale == 0.0 or n <= 1 or len(order) <= 1:
        return order
    missing = [c for c in order if c not in level.index or c not in low.index
               or c not in high.index]
    if missing:
        raise ConfigError(f"candidate {missing[0]} has no level or interval")
    sd = (high.reindex(order).to_numpy(float) - low.reindex(order).to_numpy(float)) \
        / (2.0 * Z_80)
    Z = np.random.default_rng(seed).standard_normal((draws, len(order)))
    return _greedy(order, level.reindex(order).to_numpy(float)[None, :]
                   + scale * np.clip(sd, 0.0, None)[None, :] * Z, n)


def interleaved(order: Sequence[str], other: Sequence[str], every: int = 3) -> list[str]:
    """`order` with `other`'s picks taking every `every`-th slot (`other`'s next one not
    already listed), the rest of `order` after: `every` 3 gives P P O P P O ..."""
    if every < 2:
        raise ConfigError(f"interleave every must be >= 2, got {every}")
    mine, theirs = [str(c) for c in order], [str(c) for c in other]
    out: list[str] = []
    while mine or theirs:
        pool = theirs if (len(out) + 1) % every == 0 and theirs else mine or theirs
        c = pool.pop(0)
        if c not in out:
            out.append(c)
    return out


def tail(order: Sequence[str], other: Sequence[str], head: int) -> list[str]:
    """`order`'s first `head`, then `other`'s picks not among them, then the rest of
    `order`: another recommender for the slots after the first few."""
    if head < 1:
        raise ConfigError(f"tail head must be >= 1, got {head}")
    out = [str(c) for c in order[:head]]
    for c in [*other, *order[head:]]:
        if str(c) not in out:
            out.append(str(c))
    return out


_RULE = re.compile(r"^(hedge|upside|knntail)(\d+(?:\.\d*)?)$|^knnmix$")


def parse_set_rule(name: str) -> tuple[str, float]:
    """A set method's name -> (rule, its number): "hedge0.5" -> ("hedge", 0.5), "knnmix"
    -> ("knnmix", 0.0). The number must be > 0."""
    m = _RULE.match(name)
    if m is None:
        raise ConfigError(f"unknown set method {name!r} (valid: hedge<s> or upside<s> with "
                          f"s > 0, knnmix, knntail<n>)")
    value = float(m.group(2)) if m.group(2) else 0.0
    if m.group(1) and not value > 0:
        raise ConfigError(f"set method {name!r}: {m.group(1)} needs a number > 0, got "
                          f"{value:g}")
    if m.group(1) == "knntail" and not value.is_integer():
        raise ConfigError(f"set method {name!r}: knntail needs a whole number of slots")
    return (m.group(1) or "knnmix"), value


def chosen_set(name: str, order: Sequence[str], pred: pd.DataFrame, errors: pd.DataFrame,
               knn: Sequence[str], n: int) -> list[str]:
    """The set method `name`'s list: the proposer's `order` and predictions `pred` (columns
    `gain` or `expected`, `low`, `high`), the training problems' `errors`, kNN's list."""
    rule, value = parse_set_rule(name)
    level = pred["gain"] if "gain" in pred.columns else pred["expected"]
    if rule == "hedge":
        return hedged(order, level, errors, n, value)
    if rule == "upside":
        return upside(order, level, pred["low"], pred["high"], n, value)
    if rule == "knntail":
        return tail(order, knn, int(value))
    return interleaved(order, knn)
