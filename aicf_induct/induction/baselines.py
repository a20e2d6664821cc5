"""The baselines a proposer is measured against, each a ranked list of candidate keys.

They see only the training problems' errors: `errors` is a (problem × candidate) frame of
normalized errors (NaN, a candidate never scored there, counts as 1: the worst).

- `default_choice`: one named candidate (the default MLP);
- `random_choice`: k candidates drawn without replacement;
- `knn_choice`: auto-sklearn 1.0's warm start: the best candidate of each nearest training
  problem (MinMax-scaled meta-features, L1), nearest first, repeats skipped;
- `portfolio_choice`: auto-sklearn 2.0's / TabRepo's greedy portfolio: repeatedly add the
  candidate that most lowers the mean over training problems of the portfolio's best error;
- `average_choice`: best on average, by mean error over training problems;
- `knn_order`: every candidate by its mean error over the k nearest training problems (the
  neighbors as `knn_choice`'s): kNN as an order rather than a list of winners.

Ties go to the earlier column of `errors`, so every baseline is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress

import numpy as np
import pandas as pd

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.specs import MLPSpec
from aicf_induct.induction.neighbors import Neighbors


def _filled(errors: pd.DataFrame) -> np.ndarray:
    return np.nan_to_num(errors.to_numpy(float), nan=1.0, posinf=1.0)


class NoDefaultCandidate(ConfigError):
    """The corpus lacks the default MLP and none was named: the message says how to name one
    (`default=` for the library's callers; a command words its option, `advised`)."""

    def __init__(self, structure_key: str, how: str = "default=") -> None:
        self.structure_key = structure_key
        super().__init__(self.advised(how))

    def advised(self, how: str) -> str:
        return (f"the corpus has no default MLP ({self.structure_key}): name the default "
                f"candidate with {how} (a candidate key, structure key or model spec)")


def resolve_default(meta: pd.DataFrame, name: str | None = None) -> str:
    """The default MLP's candidate key: `name` as a key, a structure key or a model spec
    string, in any form `parse_spec` and `candidate_of` read (keys left at their defaults
    may be left out); None: the candidate built from `MLPSpec()` and `Recipe()` defaults."""
    from aicf_induct.induction.space import Candidate

    cands = meta.drop_duplicates("candidate")
    if name is None:
        key = Candidate(MLPSpec()).key
        if key not in set(cands["candidate"]):
            raise NoDefaultCandidate(Candidate(MLPSpec()).structure_key)
        return key
    for col, value in (("candidate", name), *_canonical_forms(name)):
        hit = cands.loc[cands[col] == value, "candidate"]
        if len(hit) == 1:
            return str(hit.iloc[0])
        if len(hit) > 1:
            raise ConfigError(f"default '{name}' matches {len(hit)} candidates "
                              "(give a candidate key or a structure key)")
    raise ConfigError(f"default candidate '{name}' is not in the corpus")


def _canonical_forms(name: str) -> list[tuple[str, str]]:
    """(column, value) pairs to look `name` up by: as given, then in the canonical form
    the corpus stores (a short spec names the same model as its full form)."""
    from aicf_induct.frontend.families import parse_spec
    from aicf_induct.induction.space import candidate_of

    forms = [("structure_key", name), ("model", name)]
    # neither form parses: not in the corpus, as the caller says
    with suppress(ConfigError, ValueError):  # a structure key has a recipe after '|'
        forms += [("structure_key", candidate_of(name).structure_key)] if "|" in name \
            else [("model", parse_spec(name).to_string())]
    return forms


def default_choice(candidates: Sequence[str], default: str) -> list[str]:
    if default not in candidates:
        raise ConfigError(f"default candidate '{default}' is not in the corpus")
    return [default]


def random_choice(candidates: Sequence[str], k: int, rng: np.random.Generator) -> list[str]:
    idx = rng.permutation(len(candidates))[:k]
    return [candidates[i] for i in idx]


def knn_choice(errors: pd.DataFrame, neighbors: Neighbors, query: np.ndarray,
               k: int) -> list[str]:
    """`neighbors` fitted on the problems of `errors` (same index); `query`: the new
    problem's meta-features in `neighbors.feature_names_` order."""
    best = np.argmin(_filled(errors.loc[neighbors.index_]), axis=1)
    out: list[str] = []
    for pid, _ in neighbors.nearest(query, len(neighbors.index_)):
        key = str(errors.columns[best[neighbors.index_.index(pid)]])
        if key not in out:
            out.append(key)
        if len(out) == k:
            break
    return out


def portfolio_choice(errors: pd.DataFrame, k: int) -> list[str]:
    E = _filled(errors)
    chosen: list[int] = []
    current = np.full(len(E), np.inf)  # each problem's best error in the portfolio so far
    for _ in range(min(k, E.shape[1])):
        gain = np.minimum(current[:, None], E).mean(axis=0)  # mean best error if c joins
        gain[chosen] = np.inf
        c = int(np.argmin(gain))
        chosen.append(c)
        current = np.minimum(current, E[:, c])
    return [str(errors.columns[c]) for c in chosen]


def average_choice(errors: pd.DataFrame, k: int) -> list[str]:
    order = np.argsort(_filled(errors).mean(axis=0), kind="stable")[:k]
    return [str(errors.columns[c]) for c in order]


def knn_order(errors: pd.DataFrame, neighbors: Neighbors, query: np.ndarray, k: int,
              candidates: Sequence[str]) -> list[str]:
    """`candidates` (columns of `errors`) by their mean error over the `k` training problems
    nearest `query`, best first (ties: `candidates`' order); `neighbors` and `query` as in
    `knn_choice`."""
    if k < 1:
        raise ConfigError(f"a kNN order needs k >= 1, got {k}")
    near = [pid for pid, _ in neighbors.nearest(query, k)]
    means = _filled(errors.loc[near, list(candidates)]).mean(axis=0)
    return [candidates[i] for i in np.argsort(means, kind="stable")]
