"""Kernels: the registry, NumPy kernels (CPU), CUDA kernels through CuPy (GPU)."""

from aicf_induct.kernels import numpy_kernels  # noqa: F401  (registers the CPU kernels)
from aicf_induct.kernels.registry import REGISTRY, Kernel, KernelQuery, KernelRegistry

__all__ = ["REGISTRY", "Kernel", "KernelQuery", "KernelRegistry"]
