"""Trainable parameters and their gradients in two flat buffers, with per-parameter views.

One flat buffer per role means one memset zeroes every gradient and one (later: one CUDA
kernel) pass updates every parameter. The optimizers lay out their state slots the same
way, so `store.slices[name]` addresses a parameter in all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

# numpy or cupy arrays; cupy is never imported here (the caller hands us `xp`).
Array = Any
Layout = tuple[tuple[str, tuple[int, ...]], ...]


class ParamStore:
    """Trainable parameters and their gradients in two flat contiguous buffers with
    per-parameter shaped views; non-trainable state (e.g. batchnorm running stats) in
    `buffers`.

    `params[name]` and `grads[name]` are views: writing through them writes the flat
    buffers. Parameters are laid out in the order of `names`.
    """

    xp: ModuleType
    dtype: np.dtype[Any]
    names: tuple[str, ...]
    shapes: dict[str, tuple[int, ...]]
    slices: dict[str, slice]
    data: Array  # (numel,)
    grad: Array  # (numel,)
    params: dict[str, Array]
    grads: dict[str, Array]
    buffers: dict[str, Array]

    def __init__(
        self,
        shapes: Mapping[str, Sequence[int]],
        buffers: Mapping[str, Array] | None = None,
        *,
        dtype: npt.DTypeLike = np.float64,
        xp: ModuleType = np,
    ) -> None:
        """Zero-initialised parameters of the given shapes (in mapping order)."""
        self.xp = xp
        self.dtype = np.dtype(dtype)
        self.names = tuple(shapes)
        self.shapes = {n: tuple(int(d) for d in s) for n, s in shapes.items()}
        self.slices = {}
        offset = 0
        for name in self.names:
            size = int(np.prod(self.shapes[name], dtype=np.int64))
            self.slices[name] = slice(offset, offset + size)
            offset += size
        self.data = xp.zeros(offset, dtype=self.dtype)
        self.grad = xp.zeros(offset, dtype=self.dtype)
        self._make_views()
        buffers = buffers or {}
        clash = sorted(set(buffers) & set(self.names))
        if clash:
            raise ValueError(f"names used both as parameter and buffer: {clash}")
        # Buffers keep their own dtype (e.g. an integer batch counter) but get own storage.
        self.buffers = {n: xp.array(b, copy=True) for n, b in buffers.items()}

    @classmethod
    def from_arrays(
        cls,
        params: Mapping[str, Array],
        buffers: Mapping[str, Array] | None = None,
        *,
        dtype: npt.DTypeLike = np.float64,
        xp: ModuleType = np,
    ) -> ParamStore:
        """A store holding copies of `params` (cast to `dtype`) and of `buffers`."""
        store = cls({n: np.shape(a) for n, a in params.items()}, buffers, dtype=dtype, xp=xp)
        for name, value in params.items():
            store.params[name][...] = xp.asarray(value, dtype=store.dtype)
        return store

    def _make_views(self) -> None:
        self.params = {n: self.data[self.slices[n]].reshape(self.shapes[n]) for n in self.names}
        self.grads = {n: self.grad[self.slices[n]].reshape(self.shapes[n]) for n in self.names}

    @property
    def layout(self) -> Layout:
        """(name, shape) per parameter in buffer order; equal layouts share slot layouts."""
        return tuple((n, self.shapes[n]) for n in self.names)

    def zero_grad(self) -> None:
        self.grad.fill(0)

    def numel(self) -> int:
        return int(self.data.size)

    def state_arrays(self) -> dict[str, Array]:
        """Copies of every parameter and buffer by name (for snapshots): the parameters as
        views of one copy of the flat buffer (one device copy, not one per parameter)."""
        flat = self.data.copy()
        out = {n: flat[self.slices[n]].reshape(self.shapes[n]) for n in self.names}
        out.update({n: b.copy() for n, b in self.buffers.items()})
        return out

    def copy(self) -> ParamStore:
        """An independent store with the same layout, values, gradients and buffers."""
        new = ParamStore(self.shapes, self.buffers, dtype=self.dtype, xp=self.xp)
        new.data[...] = self.data
        new.grad[...] = self.grad
        return new

    def __repr__(self) -> str:
        return f"ParamStore({len(self.names)} params, {self.numel()} elements, {self.dtype})"
