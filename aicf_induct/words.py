"""Counts in messages: "1 row", "2 rows" (every layer's messages use it, so it lives at
the bottom)."""

from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """"1 epoch", "2 epochs": `n` and the noun, plural unless n is 1."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
