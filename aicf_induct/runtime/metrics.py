"""Evaluation metrics: accuracy for classification, R² for regression."""

from __future__ import annotations

import numpy as np


def accuracy(pred: np.ndarray, y: np.ndarray) -> float:
    """The share of rows whose highest class score is their label; NaN when a score is not
    finite (a diverged model), as R² is then: argmax reads a NaN row as class 0, which
    scored a diverged classifier the share of class 0 (sklearn refuses NaN predictions)."""
    return class_accuracy(predicted_classes(pred), y)


def predicted_classes(pred: np.ndarray) -> np.ndarray | None:
    """Each row's class of highest score; None when a score is not finite. What accuracy
    needs of a chunk's scores, one int a row where the scores hold one float a class."""
    return pred.argmax(axis=1) if np.isfinite(pred).all() else None


def class_accuracy(classes: np.ndarray | None, y: np.ndarray) -> float:
    """Accuracy of `predicted_classes` (NaN for None)."""
    return float("nan") if classes is None else float((classes == y).mean())


def r2(pred: np.ndarray, y: np.ndarray) -> float:
    """Coefficient of determination; invariant to the targets' standardisation. As
    sklearn's `r2_score` (force_finite) for a constant target (ss_tot 0): 1.0 for a perfect
    prediction (ss_res 0), else 0.0. Every engine scores through here (`score`)."""
    p = pred.reshape(y.shape)
    ss_res = float(((y - p) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    if ss_tot > 0:
        return 1.0 - ss_res / ss_tot
    return 1.0 if ss_res == 0 else 0.0


def score_name(task: str) -> str:
    return "accuracy" if task == "classification" else "r2"


def score(task: str, pred: np.ndarray, y: np.ndarray) -> float:
    return accuracy(pred, y) if task == "classification" else r2(pred, y)
