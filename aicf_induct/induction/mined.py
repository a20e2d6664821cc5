"""A fitted Miner's tables into the warehouse: `correlations` and `rules`, so SQL and the
service read them.

Each fit appends its rows under a new `fit_id` through the warehouse's writer (one
immutable part per table, committed atomically: a reader never sees half a fit), and one
row to `fits` whatever it mined, so that a fit that mined nothing is known too; the
`correlations` and `rules` views show the latest fit's rows, `raw_*` every fit.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from aicf_induct.errors import ConfigError
from aicf_induct.induction.mining import CORRELATION_COLUMNS, RULE_COLUMNS, Miner


def write_mined(root: str | Path, miner: Miner, fit_id: str | None = None) -> str:
    """Append `miner`'s `correlations_` and `rules_` to the warehouse at `root`; returns the
    fit id (a new one unless given)."""
    from warehouse import Writer

    if not hasattr(miner, "rules_"):
        raise ConfigError("the miner is not fitted: nothing to write")
    fit_id = fit_id or uuid.uuid4().hex[:16]
    at = pd.Timestamp(datetime.now(UTC))
    tables = {"correlations": miner.correlations_[list(CORRELATION_COLUMNS)],
              "rules": miner.rules_[list(RULE_COLUMNS)]}
    fit = pd.DataFrame({"fit_id": [fit_id], "fitted_at": [at],
                        **{name: [len(df)] for name, df in tables.items()}})
    with Writer(root, flush_interval_s=3600) as writer:
        for name, df in tables.items():
            if len(df):
                writer.append_batch(name, df.assign(fit_id=fit_id, fitted_at=at)
                                    .reset_index(drop=True))
        writer.append_batch("fits", fit)
    return fit_id
