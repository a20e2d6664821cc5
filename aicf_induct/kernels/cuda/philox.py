"""Philox4x64-10 (Salmon et al., Random123) in vectorised NumPy: the counter-based RNG behind
dropout, written out so the CUDA kernel can reproduce it bit for bit.

`OpContext.rng()` draws dropout masks from `numpy.random.Generator(Philox(key=k))`; element
e of `random(shape)` is the double made from the (e % 4)-th word of the Philox block with
counter e // 4 + 1 (NumPy increments the counter before each block), as
`(word >> 11) * 2**-53`. `uniform(key, n)` computes the same numbers without a Generator,
and dropout.cu computes them on the GPU, one block per thread.
"""

from __future__ import annotations

import numpy as np

M0, M1 = np.uint64(0xD2E7470EE14C6C93), np.uint64(0xCA5A826395121157)  # round multipliers
W0, W1 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBB67AE8584CAA73B)  # key increments
ROUNDS = 10
_LO32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def _mulhilo(a: np.uint64, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(high, low) 64-bit halves of the 128-bit product a * b, elementwise."""
    a_lo, a_hi = a & _LO32, a >> _S32
    b_lo, b_hi = b & _LO32, b >> _S32
    ll, lh, hl, hh = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    mid = (ll >> _S32) + (lh & _LO32) + (hl & _LO32)
    hi = hh + (lh >> _S32) + (hl >> _S32) + (mid >> _S32)
    return hi, a * b


def blocks(key: tuple[int, int], counters: np.ndarray) -> np.ndarray:
    """Philox4x64-10 of counters (c, 0, 0, 0): (n, 4) uint64 words."""
    c0 = counters.astype(np.uint64)
    c1 = np.zeros_like(c0)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    with np.errstate(over="ignore"):
        for r in range(ROUNDS):
            if r:
                k0, k1 = k0 + W0, k1 + W1
            hi0, lo0 = _mulhilo(M0, c0)
            hi1, lo1 = _mulhilo(M1, c2)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return np.stack([c0, c1, c2, c3], axis=1)


def uniform(key: tuple[int, int], n: int) -> np.ndarray:
    """The first n doubles of Generator(Philox(key=key)).random()."""
    words = blocks(key, np.arange(1, n // 4 + 2, dtype=np.uint64)).reshape(-1)[:n]
    return (words >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
