"""pymfe as the oracle: which of our features pymfe also computes, and running it.

Used by the agreement test and the speed benchmark; pymfe is a dev dependency only, so it
is imported lazily.
"""

from __future__ import annotations

import numpy as np

# our name -> pymfe's name (with summary suffix where pymfe summarises per-column values)
PYMFE_EQUIVALENTS: dict[str, str] = {
    "simple.n_rows": "nr_inst",
    "simple.n_features": "nr_attr",
    "simple.n_classes": "nr_class",
    "simple.features_per_row": "attr_to_inst",
    "simple.rows_per_feature": "inst_to_attr",
    "simple.class_freq_sd": "freq_class.sd",
    "stat.skewness_mean": "skewness.mean",
    "stat.skewness_sd": "skewness.sd",
    "stat.kurtosis_mean": "kurtosis.mean",
    "stat.kurtosis_sd": "kurtosis.sd",
    "stat.abs_cor_mean": "cor.mean",
    "stat.abs_cor_sd": "cor.sd",
    "stat.high_cor_fraction": "nr_cor_attr",
    "stat.outlier_features": "nr_outliers",
    "stat.sparsity_mean": "sparsity.mean",
    "stat.sparsity_sd": "sparsity.sd",
    "stat.iq_range_mean": "iq_range.mean",
    "stat.iq_range_sd": "iq_range.sd",
    "stat.mad_mean": "mad.mean",
    "stat.mad_sd": "mad.sd",
    "info.class_entropy": "class_ent",
    "info.attr_entropy_mean": "attr_ent.mean",
    "info.attr_entropy_sd": "attr_ent.sd",
    "info.joint_entropy_mean": "joint_ent.mean",
    "info.joint_entropy_sd": "joint_ent.sd",
    "info.mutual_info_mean": "mut_inf.mean",
    "info.mutual_info_sd": "mut_inf.sd",
    "info.equivalent_features": "eq_num_attr",
    "info.noise_signal_ratio": "ns_ratio",
    "landmark.one_nn": "one_nn.mean",
    "landmark.stump": "best_node.mean",
    "landmark.naive_bayes": "naive_bayes.mean",
    "landmark.linear": "linear_discr.mean",
    "complexity.pca_95_ratio": "t4",
    "complexity.pca_95_per_row": "t3",
}
PYMFE_GROUPS = ["general", "statistical", "info-theory", "landmarking", "complexity"]


def pymfe_features(X: np.ndarray, y: np.ndarray, seed: int = 0,
                   precompute: bool = True) -> dict[str, float]:
    """pymfe's values of `PYMFE_EQUIVALENTS`, keyed by our names (classification).

    precompute: pymfe's default fit, which precomputes for every selected group (for the
    complexity group that includes n x n distance matrices); False computes only what
    each requested feature needs (`precomp_groups=None`): the lean way for large data.
    """
    from pymfe.mfe import MFE

    names = sorted({v.split(".")[0] for v in PYMFE_EQUIVALENTS.values()})
    mfe = MFE(groups=PYMFE_GROUPS, features=names, summary=["mean", "sd"],
              random_state=seed, suppress_warnings=True)
    mfe.fit(np.asarray(X, dtype=np.float64), np.asarray(y), suppress_warnings=True,
            precomp_groups="all" if precompute else None)
    got = dict(zip(*mfe.extract(suppress_warnings=True), strict=True))
    return {ours: float(got[theirs]) for ours, theirs in PYMFE_EQUIVALENTS.items()}
