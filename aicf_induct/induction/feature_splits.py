"""Which split a warehouse's meta-features are of, problem by problem.

Every run logs its problem's meta-features of seed 0's training split, the one `propose`
featurises, and the warehouse records the seed beside each value
(`problem_features.split_seed`). Rows logged before that column existed have none: a
corpus swept then holds the features of whichever seed's split was logged last
(benchmarks/RESULTS.md, "Every meta-feature on the split `propose` uses"), which `induce
fit` says, naming `--refeaturise`, the flag that recomputes them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aicf_induct.problems.meta_features import FEATURE_SEED

SPLITS_SQL = """
SELECT problem_id,
       bool_or(split_seed IS NULL) AS unrecorded,
       bool_or(split_seed IS NOT NULL AND split_seed <> $seed) AS other_split
FROM problem_features GROUP BY problem_id
"""


@dataclass(frozen=True)
class FeatureSplits:
    """Problems whose features are not all of `FEATURE_SEED`'s split: with a feature of an
    unrecorded split (`unrecorded`, rows of older writers), else with one of another seed's
    (`other`)."""

    other: tuple[str, ...]
    unrecorded: tuple[str, ...]

    def note(self) -> str | None:
        """One line for the user, or None when every feature is of seed 0's split."""
        if not self.other and not self.unrecorded:
            return None
        parts = []
        if self.unrecorded:
            parts.append(f"{len(self.unrecorded)} problem(s) logged without the split "
                         "(an older version: any seed's)")
        if self.other:
            parts.append(f"{len(self.other)} of another seed's split")
        return (f"note: the meta-features of {'; '.join(parts)}, not of seed {FEATURE_SEED}'s "
                "split, which `propose` featurises: `--refeaturise` recomputes them")


def feature_splits(root: str | Path, problem_ids: Collection[str]) -> FeatureSplits:
    """The `problem_ids` (a meta-dataset's problems) whose features in the warehouse at
    `root` are not all of seed 0's split."""
    import warehouse
    from warehouse.catalog import frame

    def read(conn: Any) -> Any:
        columns = frame(conn, "SELECT * FROM problem_features LIMIT 0").columns
        if "split_seed" not in columns:  # no part was written with the column
            return frame(conn, "SELECT DISTINCT problem_id, true AS unrecorded, "
                               "false AS other_split FROM problem_features")
        return frame(conn, SPLITS_SQL, {"seed": FEATURE_SEED})

    found = warehouse.with_retry(root, read)
    found = found[found["problem_id"].isin(set(problem_ids))]
    unrecorded = found["unrecorded"].astype(bool)
    other = found["other_split"].astype(bool) & ~unrecorded  # each problem counted once
    return FeatureSplits(other=tuple(sorted(found.loc[other, "problem_id"])),
                         unrecorded=tuple(sorted(found.loc[unrecorded, "problem_id"])))
