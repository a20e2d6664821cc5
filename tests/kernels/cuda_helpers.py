"""Shared by the cuda tier: the oracle comparison (relative error of the whole tensor, NaN
never passes) and tolerances per precision."""

from __future__ import annotations

from typing import Any

import numpy as np

RTOL = {"fp32": 1e-5, "fp64": 1e-12, "tf32": 3e-3, "bf16": 2e-2}


def host(a: Any) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else a)


def rel_err(got: Any, ref: Any, floor: float = 0.0) -> float:
    """|got - ref| / max(|ref|, floor) over the whole tensor; `floor` for a tensor that is a
    sum of terms which cancel, whose rounding is relative to the terms, not to the sum."""
    g, r = host(got).astype(np.float64), host(ref).astype(np.float64)
    assert g.shape == r.shape, (g.shape, r.shape)
    assert not np.isnan(g).any(), "NaN in the result"
    denom = max(float(np.linalg.norm(r)), floor)
    return float(np.linalg.norm(g - r) / (denom if denom > 0 else 1.0))


def assert_close(got: Any, ref: Any, rtol: float, what: str = "", floor: float = 0.0) -> None:
    err = rel_err(got, ref, floor)
    assert err <= rtol, f"{what}: relative error {err:.3g} > {rtol:.3g}"


def tol(dtype: str, precision: str = "fp32") -> float:
    if precision != "fp32":
        return RTOL[precision]
    return RTOL["fp64"] if dtype == "float64" else RTOL["fp32"]


def poisoned(cp: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """A device buffer full of NaN: an element the kernel fails to write shows up."""
    return cp.full(shape, np.nan, dtype=dtype)
