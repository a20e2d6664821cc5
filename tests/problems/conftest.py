"""Shared helpers for the problems tests: small CSV files written into tmp_path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


@pytest.fixture
def write_csv(tmp_path: Path) -> Callable[[pd.DataFrame, str], Path]:
    def write(frame: pd.DataFrame, name: str = "data.csv") -> Path:
        path = tmp_path / name
        frame.to_csv(path, index=False)
        return path

    return write


@pytest.fixture
def good_frame() -> pd.DataFrame:
    """120 rows: numeric with gaps, a categorical, a binary target that depends on them."""
    rng = np.random.default_rng(0)
    n = 120
    a = rng.normal(size=n)
    b = rng.normal(size=n)
    color = rng.choice(["red", "green", "blue"], size=n)
    y = np.where(a + (color == "red") > 0.3, "yes", "no")
    a[::10] = np.nan  # 10 % missing
    return pd.DataFrame({"a": a, "b": b, "color": color, "label": y})
