"""Synthetic meta-datasets for the induction tests, built through `meta_dataset.assemble` from
the same frames the warehouse queries return, so they have the real columns."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from aicf_induct.induction.meta_dataset import assemble


def frames(scores: np.ndarray, feats: dict[str, np.ndarray], pats: list[dict[str, float]],
           seeds: int, names: list[str] | None = None, lrs: list[float] | None = None,
           ) -> tuple[pd.DataFrame, ...]:
    """Query-result frames for scores (P, C, S) and features / patterns per problem /
    candidate."""
    P, C, S = scores.shape
    names = names or [f"p{i:03d}" for i in range(P)]
    lrs = lrs or [1e-3] * C
    runs = pd.DataFrame([{
        "run_id": f"r{p}-{c}-{s}", "problem_id": f"id{p:03d}", "task": "classification",
        "seed": s, "started_at": pd.Timestamp(0), "model": f"mlp:c{c}", "candidate": f"c{c:02d}",
        "structure_key": f"mlp:c{c}|optimizer=adam,lr={lrs[c]!r},weight_decay=0.0,"
                         "batch_size=32",
        "protocol": "x", "val_score": scores[p, c, s], "test_score": scores[p, c, s],
        "fingerprint": f"fp{c}", "param_steps": 1000.0 * (c + 1)}
        for p, c, s in itertools.product(range(P), range(C), range(S))])
    problems = pd.DataFrame({"problem_id": [f"id{p:03d}" for p in range(P)], "name": names,
                             "source": "sklearn", "task": "classification", "n_features": 4,
                             "target": "y"})
    features = pd.DataFrame([{"problem_id": f"id{p:03d}", "feature": k, "value": float(v[p])}
                             for k, v in feats.items() for p in range(P)])
    patterns = pd.DataFrame([{"fingerprint": f"fp{c}", "pattern": k, "value": v}
                             for c, d in enumerate(pats) for k, v in d.items()])
    return runs, problems, features, patterns


def planted(P: int = 60, effect: float = 0.3, shuffle: bool = False, seed: int = 0,
            seeds: int = 2) -> pd.DataFrame:
    """16 candidates (layernorm on/off × depth 1-4 × relu/tanh) on P problems with meta-
    features `a`, `b`, `c` ~ U(0, 1): layernorm raises accuracy by `effect` where a < 0.5,
    nothing else matters. `shuffle`: each problem's scores shuffled over its candidates."""
    rng = np.random.default_rng(seed)
    pats = [{"norm.layernorm": float(ln), "norm.count": float(ln), "depth": float(d),
             "act.relu": float(relu), "act.tanh": float(1 - relu)}
            for ln, d, relu in itertools.product((0, 1), (1, 2, 3, 4), (0, 1))]
    feats = {k: rng.random(P) for k in "abc"}
    ln = np.array([p["norm.layernorm"] for p in pats])
    base = rng.uniform(0.5, 0.7, size=(P, 1, 1))
    noise = rng.normal(0, 0.05, size=(P, len(pats), seeds))
    gain = effect * (feats["a"] < 0.5)[:, None, None] * ln[None, :, None]
    scores = base + gain + noise
    if shuffle:
        for p in range(P):
            scores[p] = scores[p, rng.permutation(len(pats))]
    return assemble(*frames(scores, feats, pats, seeds))
