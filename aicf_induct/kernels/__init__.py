"""Kernels: the registry, NumPy kernels (CPU), fused-op references, CUDA kernels through
CuPy (GPU; registered here, compiled on first use, CuPy imported only then)."""

from aicf_induct.kernels import cuda, fused, numpy_kernels  # noqa: F401  (register kernels)
from aicf_induct.kernels.registry import REGISTRY, Kernel, KernelQuery, KernelRegistry

__all__ = ["REGISTRY", "Kernel", "KernelQuery", "KernelRegistry"]
