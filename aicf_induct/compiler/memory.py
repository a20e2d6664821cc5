"""Liveness-based memory plan: every intermediate value gets an offset in one arena.

A value lives from the instruction that defines it to the last one that reads it (inclusive,
so an instruction never writes over its own operands). Values whose lifetimes overlap get
disjoint byte ranges; the rest share. Placement is greedy by size, largest first, at the
lowest offset that fits (the classic offset-assignment heuristic for static graphs).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

ALIGN = 64  # bytes: cache-line (and vector) aligned views


@dataclass(frozen=True)
class ValueInfo:
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class MemoryPlan:
    offsets: dict[str, int]  # value id -> byte offset in the arena
    arena_bytes: int
    naive_bytes: int  # what one buffer per value would take

    def views(self, arena: np.ndarray, infos: dict[str, ValueInfo]) -> dict[str, np.ndarray]:
        out = {}
        for v, off in self.offsets.items():
            info = infos[v]
            raw = arena[off:off + max(info.nbytes, 1)]
            out[v] = raw[:info.nbytes].view(info.dtype).reshape(info.shape)
        return out


def lifetimes(program: Sequence[tuple[Iterable[str], Iterable[str | None]]], feeds: Iterable[str],
              keep: Iterable[str]) -> dict[str, tuple[int, int]]:
    """(first, last) instruction index of each value; feeds are born before instruction 0,
    kept values live past the end."""
    life: dict[str, list[int]] = {v: [-1, -1] for v in feeds}
    for idx, (ins, outs) in enumerate(program):
        for v in outs:
            if v is not None and v not in life:
                life[v] = [idx, idx]
        for v in ins:
            if v in life:
                life[v][1] = max(life[v][1], idx)
    end = len(program)
    for v in keep:
        if v in life:
            life[v][1] = end
    return {v: (a, b) for v, (a, b) in life.items()}


def plan_memory(infos: dict[str, ValueInfo], life: dict[str, tuple[int, int]]) -> MemoryPlan:
    """Largest first, each value at the lowest offset free of the values placed before it
    whose lifetimes overlap its own. The placed blocks are columns of arrays, so finding
    the overlapping ones is one vectorised pass per value (a Python scan of every placed
    block took 3.3 s for 15,000 values, most of `train --ir` on a 4,800-node graph)."""
    order = sorted(life, key=lambda v: (-infos[v].nbytes, v))
    start = np.zeros(len(order), dtype=np.int64)  # placed block i: [start, stop) bytes,
    stop = np.zeros(len(order), dtype=np.int64)  # alive from instruction born to died
    born = np.zeros(len(order), dtype=np.int64)
    died = np.zeros(len(order), dtype=np.int64)
    offsets: dict[str, int] = {}
    for n, v in enumerate(order):
        size = -(-max(infos[v].nbytes, 1) // ALIGN) * ALIGN
        first, last = life[v]
        hit = (died[:n] >= first) & (born[:n] <= last)
        clashes = sorted(zip(start[:n][hit].tolist(), stop[:n][hit].tolist(), strict=True))
        off = 0
        for o, e in clashes:
            if off + size <= o:
                break
            off = max(off, e)
        offsets[v] = off
        start[n], stop[n], born[n], died[n] = off, off + size, first, last
    arena = int(stop.max()) if len(order) else 0
    naive = sum(-(-max(infos[v].nbytes, 1) // ALIGN) * ALIGN for v in life)
    return MemoryPlan(offsets, arena, naive)
