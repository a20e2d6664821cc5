"""Backend selection: NumPy on the CPU (the reference, and CI's path) or CuPy on an NVIDIA GPU.

`select_backend("auto")` takes CuPy when it is installed and sees a GPU, else NumPy;
"numpy" and "cupy" insist (a ConfigError names what is missing). A backend tells the
runtime its array module, its device name for kernel selection, whether to fuse, and how
to bring arrays back to the host. On the GPU the kernel registry is wrapped in an
autotuner (kernels.autotune) whose choices go to the tuning store the caller passes in
(the warehouse's, `warehouse.tuning_store.WarehouseTuningStore`), else stay in memory.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from aicf_induct.errors import ConfigError
from aicf_induct.kernels import REGISTRY, KernelRegistry
from aicf_induct.kernels.autotune import BUDGET_ENV, TuningStore

BACKENDS = ("auto", "numpy", "cupy")


@dataclass
class Backend:
    name: str  # "numpy" | "cupy"
    xp: ModuleType
    device: str  # kernel registry device: "cpu" | "cuda"
    description: str  # for run records, e.g. "cuda:0 (NVIDIA H100 80GB HBM3, cupy 14.2.0)"
    registry: KernelRegistry = field(default=REGISTRY)

    @property
    def is_gpu(self) -> bool:
        return self.device == "cuda"

    def to_host(self, a: Any) -> np.ndarray:
        """A NumPy copy (or the array itself, on the CPU)."""
        if self.is_gpu and not isinstance(a, np.ndarray):
            return np.asarray(a.get())
        return np.asarray(a)

    def asarray(self, a: Any, dtype: Any = None) -> Any:
        return self.xp.asarray(a, dtype=dtype)

    def synchronize(self) -> None:
        if self.is_gpu:
            self.xp.cuda.get_current_stream().synchronize()


NUMPY = Backend("numpy", np, "cpu", "cpu (numpy)")
# GPU backends by (where the tuning store keeps choices, autotune, $AICF_TUNING_BUDGET_S):
# one autotuner per process and warehouse, so the many trainers of a sweep tune each shape
# once, within one budget; a budget set later (`tuning_off`) gets a tuner of its own
_GPU: dict[tuple[str, bool, str], Backend] = {}


@functools.cache
def gpu_available() -> bool:
    """Whether CuPy imports and sees a GPU (asked once per process)."""
    from aicf_induct.kernels.cuda import available

    return available()


def select_backend(kind: str = "auto", *, tuning: TuningStore | None = None,
                   autotune: bool = True) -> Backend:
    """The backend for `kind` ("auto" | "numpy" | "cupy"). `tuning`: where the autotuner
    keeps its choices across restarts (GPU only; None: in this process's memory)."""
    if kind not in BACKENDS:
        raise ConfigError(f"unknown backend {kind!r} (valid: {', '.join(BACKENDS)})")
    if kind == "numpy" or (kind == "auto" and not gpu_available()):
        return NUMPY
    if not gpu_available():
        raise ConfigError("backend 'cupy' needs CuPy and an NVIDIA GPU; neither import nor "
                          "device worked here (try backend 'numpy' or 'auto')")
    key = (tuning.where if tuning is not None else "", autotune, os.environ.get(BUDGET_ENV, ""))
    if key not in _GPU:
        _GPU[key] = _cupy_backend(tuning, autotune)
    return _GPU[key]


def _cupy_backend(tuning: TuningStore | None, autotune: bool) -> Backend:
    import cupy

    from aicf_induct.kernels.cuda.compile import device

    info = device()
    desc = f"cuda:{info.index} ({info.name}, sm_{info.capability}, cupy {cupy.__version__})"
    registry: KernelRegistry = REGISTRY
    if autotune:
        from aicf_induct.kernels.autotune import Autotuner, TunedRegistry
        from aicf_induct.kernels.cuda.timer import cuda_timer

        registry = TunedRegistry(Autotuner(cuda_timer, info.name, tuning))
    return Backend("cupy", cupy, "cuda", desc, registry)
