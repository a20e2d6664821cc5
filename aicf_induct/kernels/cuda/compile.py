"""The compile cache, the only global state in kernels/: compiled functions and device
facts, memoised per device (as CuPy's `memoize(for_each_device=True)` does). CuPy is
imported here, on the first compile, never at import time."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aicf_induct.kernels.cuda.sources import Family, code, options


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    capability: int  # e.g. 90 for sm_90
    sms: int  # multiprocessors
    smem_optin: int  # shared memory bytes a block may opt in to


_FUNCTIONS: dict[tuple[Any, ...], Any] = {}
_DEVICES: dict[int, DeviceInfo] = {}
_CUBLAS: dict[int, Any] = {}  # device -> (libcublas, handle)
_CUBLASLT: dict[int, Any] = {}  # device -> (libcublasLt, handle)


def device() -> DeviceInfo:
    """Facts about the current CUDA device."""
    import cupy

    idx = cupy.cuda.runtime.getDevice()
    info = _DEVICES.get(idx)
    if info is None:
        props = cupy.cuda.runtime.getDeviceProperties(idx)
        name = props["name"]
        info = DeviceInfo(idx, name.decode() if isinstance(name, bytes) else str(name),
                          10 * int(props["major"]) + int(props["minor"]),
                          int(props["multiProcessorCount"]),
                          int(props["sharedMemPerBlockOptin"]))
        _DEVICES[idx] = info
    return info


def tensor_cores(dtype: Any) -> bool:
    """Whether TF32/bf16 tensor-core products apply to `dtype` here: float32 data on sm_80
    or newer (mma.sync TF32, WMMA bf16)."""
    import numpy as np

    return np.dtype(dtype) == np.float32 and device().capability >= 80


def max_active_clusters(fn: Any, grid: int, threads: int, smem_bytes: int) -> int | None:
    """How many clusters of `fn` (a RawKernel whose cluster shape is fixed at compile time,
    `__cluster_dims__`) the device runs at once, by the driver's
    cuOccupancyMaxActiveClusters; None where the driver cannot say. CuPy does not wrap it."""
    import ctypes

    class LaunchConfig(ctypes.Structure):  # CUlaunchConfig
        _fields_ = [("grid_x", ctypes.c_uint), ("grid_y", ctypes.c_uint),
                    ("grid_z", ctypes.c_uint), ("block_x", ctypes.c_uint),
                    ("block_y", ctypes.c_uint), ("block_z", ctypes.c_uint),
                    ("shared_bytes", ctypes.c_uint), ("stream", ctypes.c_void_p),
                    ("attrs", ctypes.c_void_p), ("num_attrs", ctypes.c_uint)]

    try:
        lib = ctypes.CDLL("libcuda.so.1")
        query = lib.cuOccupancyMaxActiveClusters
    except (OSError, AttributeError):
        return None
    n = ctypes.c_int(0)
    config = LaunchConfig(grid, 1, 1, threads, 1, 1, smem_bytes, None, None, 0)
    rc = query(ctypes.byref(n), ctypes.c_void_p(int(fn.kernel.ptr)), ctypes.byref(config))
    return int(n.value) if rc == 0 and n.value > 0 else None


def function(family: Family, name: str, extra: tuple[str, ...] = ()) -> Any:
    """The compiled kernel `name` (a template instantiation) of a source family; `extra`:
    further NVRTC options (e.g. a -D switch)."""
    import cupy

    idx = cupy.cuda.runtime.getDevice()
    key = (idx, family, name, *extra)
    fn = _FUNCTIONS.get(key)
    if fn is None:
        opts = (*options(family), *extra)
        if family.toolkit:
            opts = (*opts, *toolkit_includes())
        module = cupy.RawModule(code=code(family), options=("-std=c++17", *opts),
                                name_expressions=[name])
        fn = module.get_function(name)
        _FUNCTIONS[key] = fn
    return fn


def toolkit_includes() -> tuple[str, ...]:
    """-I for a CUDA toolkit's headers: the pip wheels' include folder lacks crt/mma.h,
    which <mma.h> (WMMA) needs."""
    roots = [os.environ.get("CUDA_PATH", ""), os.environ.get("CUDA_HOME", "")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    roots.append("/usr/local/cuda")
    for r in roots:
        inc = Path(r) / "include" if r else None
        if inc is not None and (inc / "crt" / "mma.h").is_file():
            return (f"-I{inc}",)
    return ()


def cublas() -> tuple[Any, int]:
    """(libcublas through ctypes, CuPy's handle for this device). CuPy's wrappers refuse any
    cuBLAS call while a stream captures; cuBLAS itself supports capture when its workspace
    is fixed, so the GEMMs of a captured step call the library directly, each with its own
    workspace (`launch.gemm_workspace`)."""
    import ctypes

    import cupy
    from cupy_backends.cuda.libs import cublas as cupy_cublas  # loads libcublas

    idx = cupy.cuda.runtime.getDevice()
    got = _CUBLAS.get(idx)
    if got is None:
        maps = Path("/proc/self/maps").read_text().splitlines()
        path = next((line.split()[-1] for line in maps
                     if "libcublas.so" in line and "libcublasLt" not in line), None)
        if path is None:
            raise RuntimeError(f"libcublas is not loaded ({cupy_cublas.__name__})")
        lib = ctypes.CDLL(path)
        vp, i = ctypes.c_void_p, ctypes.c_int
        lib.cublasSetStream_v2.argtypes = [vp, vp]
        lib.cublasSetPointerMode_v2.argtypes = [vp, i]
        lib.cublasSetWorkspace_v2.argtypes = [vp, vp, ctypes.c_size_t]
        lib.cublasGemmEx.argtypes = [vp, i, i, i, i, i, vp, vp, i, i, vp, i, i, vp, vp, i, i,
                                     i, i]
        ll = ctypes.c_longlong
        lib.cublasGemmStridedBatchedEx.argtypes = [vp, i, i, i, i, i, vp, vp, i, i, ll, vp, i,
                                                   i, ll, vp, vp, i, i, ll, i, i, i]
        handle = cupy.cuda.device.get_cublas_handle()
        check_cublas(lib.cublasSetPointerMode_v2(handle, 0), "cublasSetPointerMode")
        got = _CUBLAS[idx] = (lib, handle)
    return got[0], got[1]


def cublaslt() -> tuple[Any, int]:
    """(libcublasLt through ctypes, a handle of ours). Every call brings its workspace
    (`launch.gemm_workspace`) and runs on the current stream. The library is the one
    libcublas loaded."""
    import ctypes

    import cupy

    idx = cupy.cuda.runtime.getDevice()
    got = _CUBLASLT.get(idx)
    if got is None:
        cublas()
        maps = Path("/proc/self/maps").read_text().splitlines()
        path = next((line.split()[-1] for line in maps if "libcublasLt.so" in line), None)
        if path is None:
            raise RuntimeError("libcublasLt is not loaded")
        lib = ctypes.CDLL(path)
        vp, i, sz, u64, i64 = (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t,
                               ctypes.c_uint64, ctypes.c_int64)
        pp = ctypes.POINTER(ctypes.c_void_p)
        lib.cublasLtCreate.argtypes = [pp]
        lib.cublasLtMatmulDescCreate.argtypes = [pp, i, i]
        lib.cublasLtMatmulDescSetAttribute.argtypes = [vp, i, vp, sz]
        lib.cublasLtMatrixLayoutCreate.argtypes = [pp, i, u64, u64, i64]
        lib.cublasLtMatmulPreferenceCreate.argtypes = [pp]
        lib.cublasLtMatmulPreferenceSetAttribute.argtypes = [vp, i, vp, sz]
        lib.cublasLtMatmulAlgoGetHeuristic.argtypes = [vp, vp, vp, vp, vp, vp, vp, i, vp,
                                                       ctypes.POINTER(ctypes.c_int)]
        lib.cublasLtMatmul.argtypes = [vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp,
                                       sz, vp]
        handle = ctypes.c_void_p()
        check_cublas(lib.cublasLtCreate(ctypes.byref(handle)), "cublasLtCreate")
        got = _CUBLASLT[idx] = (lib, int(handle.value or 0))
    return got[0], got[1]


def check_cublas(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed: cuBLAS status {status}")
