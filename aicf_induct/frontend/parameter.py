"""`Parameter` and `Buffer`: a module's declared state, with an optional concrete value.

A parameter knows its shape and how it starts (an initializer string from
`aicf_induct.ir.init`, or None for the default of the op that uses it). It has no value
unless one is given: tracing needs only shapes, and `trace_with_values` draws values for the
rest from the initializers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aicf_induct.errors import ConfigError
from aicf_induct.ir.init import check_init


class Parameter:
    """Trainable state. `shape` may be left out when `value` is given."""

    trainable = True

    def __init__(self, shape: Sequence[int] | None = None, init: str | None = None,
                 value: np.ndarray | Sequence[float] | None = None) -> None:
        kind = type(self).__name__
        try:
            arr = None if value is None else np.array(value, dtype=np.float64)
        except (TypeError, ValueError) as err:  # strings, ragged lists, objects
            raise ConfigError(f"{kind} value is not an array of numbers ({err})") from None
        if shape is None:
            if arr is None:
                raise ConfigError(f"{kind} needs a shape or a value")
            shape = arr.shape
        if not all(isinstance(d, int | np.integer) and not isinstance(d, bool) for d in shape):
            raise ConfigError(f"{kind} shape must be ints, got {tuple(shape)}")  # int(4.7) is 4
        self.shape: tuple[int, ...] = tuple(int(d) for d in shape)
        if any(d <= 0 for d in self.shape):
            raise ConfigError(f"{kind} shape must be positive, got {self.shape}")
        if arr is not None and arr.shape != self.shape:
            raise ConfigError(f"{kind} value has shape {arr.shape}, "
                              f"declared {self.shape}")
        if init is not None and (problem := check_init(init)):
            raise ConfigError(problem)
        self.init = init
        self.value = arr

    def __repr__(self) -> str:
        init = f", init={self.init!r}" if self.init else ""
        val = ", value=set" if self.value is not None else ""
        return f"{type(self).__name__}({list(self.shape)}{init}{val})"


class Buffer(Parameter):
    """Non-trainable state that still belongs to the model (batchnorm running statistics)."""

    trainable = False
