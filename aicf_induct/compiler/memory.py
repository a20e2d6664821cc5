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
    placed: list[tuple[int, int, int, int]] = []  # (offset, end offset, first, last)
    offsets: dict[str, int] = {}
    order = sorted(life, key=lambda v: (-infos[v].nbytes, v))
    for v in order:
        size = -(-max(infos[v].nbytes, 1) // ALIGN) * ALIGN
        first, last = life[v]
        clashes = sorted((o, e) for o, e, f, la in placed if not (la < first or last < f))
        off = 0
        for o, e in clashes:
            if off + size <= o:
                break
            off = max(off, e)
        offsets[v] = off
        placed.append((off, off + size, first, last))
    arena = max((e for _, e, _, _ in placed), default=0)
    naive = sum(-(-max(infos[v].nbytes, 1) // ALIGN) * ALIGN for v in life)
    return MemoryPlan(offsets, arena, naive)
