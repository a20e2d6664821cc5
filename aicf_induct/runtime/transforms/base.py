"""The `Transform` contract: a train-time rewrite of the IR that carries parameters and
optimizer state across.

A transform is configured by keyword options (`Widen(factor=2.0)`), names where it can
apply (`sites(graph)`: node ids), says why it cannot apply somewhere
(`applicable(graph, site)` returns the reason, or None), and applies to a running model
between two steps: `apply(state, site, rng)` returns a new `ModelState` (graph, values,
optimizer state) and leaves the given one untouched.

`function_preserving` means: the rewritten model's eval-mode outputs (dropout off,
batchnorm on running statistics) equal the old ones to rounding. Each transform's
docstring states its remapping rule for parameters and optimizer slots (Adam's m and v,
SGD's momentum, the per-parameter step counts); docs/rewrites.md collects them.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from aicf_induct.errors import AicfError
from aicf_induct.ir.graph import Graph
from aicf_induct.ir.validate import validate
from aicf_induct.runtime.model_state import ModelState
from aicf_induct.runtime.transforms.reading import reading


class RewriteError(AicfError):
    """A transform asked to apply where it cannot, or with bad options."""


def int_option(name: str, value: Any, low: int | None = None) -> int:
    """An integer option as an int (NumPy's too: options read back from a table), else a
    RewriteError naming it: a bool, a float such as 2.5 or a string failed deep inside the
    rewrite with a TypeError, which ended the run rather than the rewrite."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or \
            (low is not None and value < low):
        rule = "an int" if low is None else f"an int >= {low}"
        raise RewriteError(f"{name} must be {rule}, got {value!r}")
    return int(value)


def number_option(name: str, value: Any, low: float | None = None) -> float:
    """A real option as a float, finite (and at least `low`), else a RewriteError naming it:
    a bool, a string or inf failed deep inside the rewrite, or asked for no end of units."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not math.isfinite(value) or (low is not None and value < low):
        rule = "a finite number" if low is None else f"a finite number >= {low:g}"
        raise RewriteError(f"{name} must be {rule}, got {value!r}")
    return float(value)


class Transform(ABC):
    name: ClassVar[str]

    @property
    @abstractmethod
    def function_preserving(self) -> bool:
        """Whether eval-mode outputs are unchanged by `apply` (see the module docstring)."""

    @abstractmethod
    def candidates(self, graph: Graph) -> list[str]:
        """Node ids worth checking with `applicable`."""

    @abstractmethod
    def applicable(self, graph: Graph, site: str) -> str | None:
        """None when the transform applies at `site`, else the reason it does not."""

    @abstractmethod
    def _apply(self, state: ModelState, site: str, rng: np.random.Generator) -> None:
        """Rewrite `state` (a private copy) in place."""

    def options(self) -> dict[str, Any]:
        """The transform's options, JSON-able (for events and decisions)."""
        return {}

    def sites(self, graph: Graph) -> list[str]:
        """Every node id where the transform applies, in graph order."""
        with reading(graph):
            return [s for s in self.candidates(graph) if self.applicable(graph, s) is None]

    def apply(self, state: ModelState, site: str, rng: np.random.Generator) -> ModelState:
        reason = self.applicable(state.graph, site)
        if reason is not None:
            raise RewriteError(f"{self.name} at '{site}': {reason}")
        new = state.copy()
        new.grads = state.grads  # read-only input (gradient pruning); not carried over
        self._apply(new, site, rng)
        new.grads = None
        validate(new.graph)
        new.check()
        return new

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"{type(self).__name__}({opts})"
