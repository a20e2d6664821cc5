"""The evaluation's numbers, from a `lopo.LopoResult`: per method and k, mean normalized error
with a bootstrap CI, regret, average rank; the proposer against each baseline (win rate,
mean difference with a bootstrap CI, paired Wilcoxon p, Holm-adjusted over the baselines);
the gap it closes between the default and the full search; and interval calibration.

Problems are the unit everywhere: bootstraps resample problems; Wilcoxon pairs them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import wilcoxon

from aicf_induct.induction.inference import bootstrap_mean_ci, holm
from aicf_induct.induction.lopo import METHODS, LopoResult

SUMMARY_COLUMNS = ("method", "k", "problems", "norm_error", "ci_low", "ci_high", "regret",
                   "avg_rank")
COMPARISON_COLUMNS = ("method", "baseline", "k", "problems", "win_rate", "mean_diff",
                      "ci_low", "ci_high", "p_value", "p_holm")


def _wide(choices: pd.DataFrame, k: int, column: str = "norm_error") -> pd.DataFrame:
    """problem × method values at one k."""
    sub = choices[choices["k"] == k]
    return sub.pivot_table(index="problem_id", columns="method", values=column,
                           aggfunc="first")


def summary(result: LopoResult, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per (method, k): mean normalized error [95 % bootstrap CI], mean regret, average rank
    among the methods (1 best; ties share)."""
    rows = []
    for k in sorted(result.choices["k"].unique()):
        err = _wide(result.choices, k)
        reg = _wide(result.choices, k, "regret")
        ranks = err.rank(axis=1, method="average")
        for method in [m for m in METHODS if m in err.columns]:
            lo, hi = bootstrap_mean_ci(err[method].to_numpy(float), n_boot, seed=seed)
            r = reg[method].to_numpy(float)
            rows.append({"method": method, "k": int(k), "problems": int(err[method].count()),
                         "norm_error": float(err[method].mean()), "ci_low": lo, "ci_high": hi,
                         "regret": float(r[np.isfinite(r)].mean()) if np.isfinite(r).any()
                         else float("nan"),
                         "avg_rank": float(ranks[method].mean())})
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def compare(result: LopoResult, method: str = "proposer", k: int = 1,
            baselines: tuple[str, ...] | None = None, n_boot: int = 2000,
            seed: int = 0) -> pd.DataFrame:
    """`method` against each baseline at k, on the problems both scored: win rate (lower
    normalized error; ties count half), mean difference (method − baseline; negative:
    method better) with its bootstrap CI, two-sided paired Wilcoxon p, Holm over the
    baselines. `oracle` is left out: no method beats it."""
    err = _wide(result.choices, k)
    names = baselines or tuple(m for m in METHODS if m in err.columns and
                               m not in (method, "oracle"))
    rows = []
    for base in names:
        pair = err[[method, base]].dropna()
        d = (pair[method] - pair[base]).to_numpy(float)
        lo, hi = bootstrap_mean_ci(d, n_boot, seed=seed)
        p = float(wilcoxon(d, zero_method="zsplit").pvalue) if np.any(d != 0) else 1.0
        rows.append({"method": method, "baseline": base, "k": k, "problems": len(d),
                     "win_rate": float(np.mean((d < 0) + 0.5 * (d == 0))),
                     "mean_diff": float(d.mean()), "ci_low": lo, "ci_high": hi,
                     "p_value": p})
    out = pd.DataFrame(rows, columns=[c for c in COMPARISON_COLUMNS if c != "p_holm"])
    out["p_holm"] = holm(out["p_value"].to_numpy(float))
    return out


def gap_closed(result: LopoResult, method: str = "proposer", k: int = 1) -> float:
    """(default − method) / (default − full search) of the mean normalized error: 1 when the
    method matches the full search, 0 when it is no better than the default."""
    err = _wide(result.choices, k).mean()
    gap = err["default"] - err["full_search"]
    return float((err["default"] - err[method]) / gap) if gap != 0 else float("nan")


def calibration(result: LopoResult, ks: tuple[int, ...] = (1, 3, 5)) -> pd.DataFrame:
    """Share of held-out outcomes inside the meta-model's intervals: over every candidate,
    and over the top-k proposals; with the mean interval width."""
    cal = result.calibration
    rows = [{"candidates": "all", "n": len(cal), "coverage": float(cal["inside"].mean()),
             "width": float((cal["high"] - cal["low"]).mean())}]
    for k in ks:
        top = cal[cal["proposed_rank"] <= k]
        rows.append({"candidates": f"top-{k}", "n": len(top),
                     "coverage": float(top["inside"].mean()),
                     "width": float((top["high"] - top["low"]).mean())})
    out = pd.DataFrame(rows)
    out.insert(0, "level", result.level)
    return out
