"""Backend selection: NumPy on the CPU (the reference, and CI's path) or CuPy on an NVIDIA GPU.

`select_backend("auto")` takes CuPy when it is installed and sees a GPU, else NumPy;
"numpy" and "cupy" insist (a ConfigError names what is missing). A backend tells the
runtime its array module, its device name for kernel selection, whether to fuse, and how
to bring arrays back to the host. On the GPU the kernel registry is wrapped in an
autotuner (kernels.autotune), persisted in the warehouse when a root is given.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from aicf_induct.errors import ConfigError
from aicf_induct.kernels import REGISTRY, KernelRegistry

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
# GPU backends by (tuning root, autotune): one autotuner per process and warehouse, so the
# many trainers of a sweep tune each shape once
_GPU: dict[tuple[str, bool], Backend] = {}


@functools.cache
def gpu_available() -> bool:
    """Whether CuPy imports and sees a GPU (asked once per process)."""
    from aicf_induct.kernels.cuda import available

    return available()


def select_backend(kind: str = "auto", *, tuning_root: str | Path | None = None,
                   autotune: bool = True) -> Backend:
    """The backend for `kind` ("auto" | "numpy" | "cupy"). `tuning_root`: a warehouse whose
    kernel_tuning table keeps the autotuner's choices across restarts (GPU only)."""
    if kind not in BACKENDS:
        raise ConfigError(f"unknown backend {kind!r} (valid: {', '.join(BACKENDS)})")
    if kind == "numpy" or (kind == "auto" and not gpu_available()):
        return NUMPY
    if not gpu_available():
        raise ConfigError("backend 'cupy' needs CuPy and an NVIDIA GPU; neither import nor "
                          "device worked here (try backend 'numpy' or 'auto')")
    key = (str(tuning_root or ""), autotune)
    if key not in _GPU:
        _GPU[key] = _cupy_backend(tuning_root, autotune)
    return _GPU[key]


def _cupy_backend(tuning_root: str | Path | None, autotune: bool) -> Backend:
    import cupy

    from aicf_induct.kernels.cuda.compile import device

    info = device()
    desc = f"cuda:{info.index} ({info.name}, sm_{info.capability}, cupy {cupy.__version__})"
    registry: KernelRegistry = REGISTRY
    if autotune:
        from aicf_induct.kernels.autotune import (
            Autotuner,
            TunedRegistry,
            TuningStore,
            WarehouseTuningStore,
        )
        from aicf_induct.kernels.cuda.timer import cuda_timer

        store: TuningStore | None = None
        if tuning_root is not None:
            store = WarehouseTuningStore(tuning_root)
        registry = TunedRegistry(Autotuner(cuda_timer, info.name, store))
    return Backend("cupy", cupy, "cuda", desc, registry)
