"""Global gradient-norm clipping over a ParamStore's flat gradient buffer (one reduction)."""

from __future__ import annotations

import math

from aicf_induct.errors import ConfigError
from aicf_induct.runtime.params import ParamStore


def global_grad_norm(store: ParamStore) -> float:
    """The L2 norm of all gradients together."""
    return math.sqrt(float(store.xp.dot(store.grad, store.grad)))


def clip_grad_norm_(store: ParamStore, max_norm: float) -> float:
    """Scale all gradients by max_norm / (norm + 1e-6) when that is below 1, as
    torch.nn.utils.clip_grad_norm_ does; returns the norm before clipping.

    A non-finite norm leaves the gradients as they are: the trainer sees it and stops,
    rather than getting gradients zeroed or turned into NaN.
    """
    if not max_norm > 0 or not math.isfinite(max_norm):
        raise ConfigError(f"gradient clipping max_norm must be a positive number, got {max_norm!r}")
    norm = global_grad_norm(store)
    coef = max_norm / (norm + 1e-6)
    if coef < 1.0 and math.isfinite(norm):
        store.grad *= coef
    return norm
