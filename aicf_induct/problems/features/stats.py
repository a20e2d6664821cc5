"""Simple, statistical and complexity meta-features: vectorised over columns.

Definitions follow pymfe where it has the feature (its `general`, `statistical` and
`complexity` groups, default arguments), so the values agree with it; the differences are
that a constant column counts as skewness 0, kurtosis 0 and correlation 0 (pymfe gives
NaN), and that per-column values are summarised by mean and sample sd (pymfe's "mean" and
"sd", ddof=1) with sd 0 for a single column.
"""

from __future__ import annotations

import numpy as np

HIGH_CORRELATION = 0.5  # pymfe nr_cor_attr threshold
OUTLIER_WHIS = 1.5  # pymfe nr_outliers: beyond 1.5 IQR from the quartiles
MAD_FACTOR = 1.4826  # pymfe mad: consistent with the sd of normal data
PCA_VARIANCE = 0.95  # pymfe t3/t4: principal components for 95 % of the variance


def summarise(prefix: str, values: np.ndarray) -> dict[str, float]:
    """pymfe's mean and sd (ddof=1) of per-column values."""
    v = np.asarray(values, dtype=np.float64)
    sd = float(v.std(ddof=1)) if v.size > 1 else 0.0
    return {f"{prefix}_mean": float(v.mean()) if v.size else 0.0, f"{prefix}_sd": sd}


def moments(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column skewness and kurtosis, pymfe's method 3 (m3/s^3, m4/s^4 - 3 with the
    ddof=1 sd); 0 for a constant column."""
    n = X.shape[0]
    xc = X - X.mean(axis=0)
    m2 = np.einsum("ij,ij->j", xc, xc) / n
    xc2 = xc * xc
    m3 = np.einsum("ij,ij->j", xc2, xc) / n
    m4 = np.einsum("ij,ij->j", xc2, xc2) / n
    # scipy calls a column constant when m2 is at rounding level of its mean
    const = m2 <= (np.finfo(np.float64).resolution * X.mean(axis=0)) ** 2
    safe = np.where(const, 1.0, m2)
    skew = np.where(const, 0.0, m3 / safe**1.5 * ((n - 1.0) / n) ** 1.5)
    kurt = np.where(const, 0.0, (m4 / safe**2) * (1.0 - 1.0 / n) ** 2 - 3.0)
    return skew, kurt


def abs_correlations(X: np.ndarray) -> np.ndarray:
    """|Pearson correlation| of each distinct column pair (lower triangle, pymfe's order);
    0 for pairs with a constant column."""
    d = X.shape[1]
    if d < 2:
        return np.zeros(0)
    xc = X - X.mean(axis=0)
    cov = xc.T @ xc  # (d, d)
    sd = np.sqrt(np.diag(cov))
    ok = sd > 0
    inv = np.where(ok, 1.0 / np.where(ok, sd, 1.0), 0.0)
    corr = np.abs(cov * inv[:, None] * inv[None, :])
    return np.clip(corr[np.tril_indices(d, k=-1)], 0.0, 1.0)


def simple_features(n: int, d: int, y: np.ndarray | None, n_classes: int) -> dict[str, float]:
    out = {
        "simple.n_rows": float(n),
        "simple.n_features": float(d),
        "simple.n_classes": float(n_classes),
        "simple.features_per_row": d / n,  # pymfe attr_to_inst
        "simple.rows_per_feature": n / d,  # pymfe inst_to_attr
        "simple.log_n_rows": float(np.log10(n)),
        "simple.log_n_features": float(np.log10(d)),
        "simple.is_classification": float(y is not None),
    }
    if y is not None:
        freq = np.bincount(y) / len(y)
        freq = freq[freq > 0]
        out |= {
            "simple.class_freq_sd": float(freq.std(ddof=1)) if freq.size > 1 else 0.0,
            "simple.class_freq_min": float(freq.min()),
            "simple.class_freq_max": float(freq.max()),  # the majority-class baseline
            "simple.imbalance_ratio": float(freq.min() / freq.max()),
        }
    return out


def statistical_features(X: np.ndarray) -> dict[str, float]:
    n, d = X.shape
    skew, kurt = moments(X)
    cor = abs_correlations(X)
    q0, q1, med, q3, q4 = np.percentile(X, (0, 25, 50, 75, 100), axis=0)
    iqr = q3 - q1
    outliers = int(np.sum((q1 - OUTLIER_WHIS * iqr > q0) | (q3 + OUTLIER_WHIS * iqr < q4)))
    mad = np.median(np.abs(X - med), axis=0) * MAD_FACTOR
    xs = np.sort(X, axis=0)
    n_unique = 1 + np.count_nonzero(np.diff(xs, axis=0), axis=0)
    sparsity = (n / n_unique - 1.0) / (n - 1.0)
    pairs = d * (d - 1) / 2
    return {
        **summarise("stat.skewness", skew),
        **summarise("stat.kurtosis", kurt),
        **summarise("stat.abs_cor", cor),
        "stat.high_cor_fraction": float((cor >= HIGH_CORRELATION).sum() / pairs) if pairs else 0.0,
        "stat.outlier_features": float(outliers),  # pymfe nr_outliers
        "stat.outlier_fraction": outliers / d,
        **summarise("stat.sparsity", sparsity),
        **summarise("stat.iq_range", iqr),
        **summarise("stat.mad", mad),
    }


def target_features(X: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Regression only: the target's shape and its linear relation to the features."""
    skew, kurt = moments(y[:, None])
    yc = y - y.mean()
    xc = X - X.mean(axis=0)
    denom = np.sqrt((xc * xc).sum(0) * float(yc @ yc))
    ok = denom > 0
    cor = np.abs(np.where(ok, (xc.T @ yc) / np.where(ok, denom, 1.0), 0.0))
    return {"stat.target_skewness": float(skew[0]), "stat.target_kurtosis": float(kurt[0]),
            "stat.target_abs_cor_max": float(cor.max()),
            "stat.target_abs_cor_mean": float(cor.mean())}


def complexity_features(X: np.ndarray, n_rows: int | None = None) -> dict[str, float]:
    """Principal components needed for 95 % of the variance (pymfe t3, t4 use it).
    n_rows: the dataset's row count when X is a row sample (for the per-row ratio)."""
    n, d = X.shape
    xc = X - X.mean(axis=0)
    ev = np.linalg.eigvalsh(xc.T @ xc / max(n - 1, 1))[::-1]  # (d,) descending
    ev = np.clip(ev[: min(n, d)], 0.0, None)
    total = ev.sum()
    if total <= 0:
        k = 1
    else:  # scikit-learn's rule for PCA(n_components=0.95)
        k = int(np.searchsorted(np.cumsum(ev / total), PCA_VARIANCE, side="right")) + 1
        k = min(k, len(ev))
    return {"complexity.pca_95": float(k), "complexity.pca_95_ratio": k / d,  # pymfe t4
            "complexity.pca_95_per_row": k / (n_rows or n)}  # pymfe t3
