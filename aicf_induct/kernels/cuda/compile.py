"""The compile cache, the only global state in kernels/: compiled functions and device
facts, memoised per device (as CuPy's `memoize(for_each_device=True)` does). CuPy is
imported here, on the first compile, never at import time."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aicf_induct.kernels.cuda import sources

FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {  # family -> (source, NVRTC options)
    "gemm_tiled": (sources.GEMM_TILED, ()),
    "gemm_wmma": (sources.GEMM_WMMA, ()),
    "elementwise": (sources.ELEMENTWISE, ()),
    "losses": (sources.LOSSES, ()),
    "layernorm": (sources.LAYERNORM, ()),
    "dropout": (sources.DROPOUT, ()),
    # no fused multiply-add: the update rounds as runtime/optimizers.py does
    "optim": (sources.OPTIM, ("--fmad=false",)),
}


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    capability: int  # e.g. 90 for sm_90
    sms: int  # multiprocessors


_FUNCTIONS: dict[tuple[int, str, str], Any] = {}
_DEVICES: dict[int, DeviceInfo] = {}


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
                          int(props["multiProcessorCount"]))
        _DEVICES[idx] = info
    return info


def function(family: str, name: str) -> Any:
    """The compiled kernel `name` (a template instantiation) of a source family."""
    import cupy

    idx = cupy.cuda.runtime.getDevice()
    key = (idx, family, name)
    fn = _FUNCTIONS.get(key)
    if fn is None:
        src, opts = FAMILIES[family]
        if family == "gemm_wmma":
            opts = (*opts, *toolkit_includes())
        module = cupy.RawModule(code=src, options=("-std=c++17", *opts),
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
