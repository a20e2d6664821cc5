"""Run the CUDA launchers and kernels without a GPU: a stand-in `cupy` module whose arrays are
NumPy arrays, whose RawModule compiles a source family for the host against cuda_emu.h
(g++, one fiber per CUDA thread, switched at barriers), and GEMMs that follow cuBLAS's
column-major contract in NumPy (checking its leading-dimension rules). The launchers run
unchanged: the same grids, arguments and template instantiations the GPU gets. It finds
indexing, layout, synchronisation and argument-order mistakes on the CPU; speed, occupancy
and real concurrency (a block's threads run in turn between barriers, so a missing barrier
shows only where a thread reads what a later one writes) are the cuda tier's to check.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from aicf_induct.kernels.cuda import compile as cuda_compile
from aicf_induct.kernels.cuda import gemm

HERE = Path(__file__).resolve().parent
_LIBS: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Any] = {}
_CTYPES = {np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
           np.dtype(np.uint32): ctypes.c_uint32, np.dtype(np.uint64): ctypes.c_uint64,
           np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double,
           np.dtype(np.bool_): ctypes.c_bool}


def cache_dir() -> Path:
    """Where host builds are kept between runs (keyed by a digest of shim, source and
    options: an edit rebuilds)."""
    d = Path(tempfile.gettempdir()) / f"aicf_cuda_emu_{os.getuid()}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def compiler() -> str | None:
    return shutil.which("g++") or shutil.which("c++")


def _symbol(name: str) -> str:
    return "emu_" + re.sub(r"\W", "_", name)


def _host_source(code: str, names: list[str]) -> str:
    """The family's code for the host: dynamic shared memory is the emulator's buffer; one
    exported launcher per instantiation."""
    code = re.sub(r"extern\s+__shared__[^;]*?\b(\w+)\s*\[\s*\]\s*;",
                  r"unsigned char* \1 = emu_dynamic_smem;", code)
    exports = "".join(f'extern "C" void {_symbol(n)}(dim3 g, dim3 b, void** a) '
                      f"{{ emu_run(&{n}, g, b, a); }}\n"
                      f'extern "C" int {_symbol(n)}_sizes(int* out) '
                      f"{{ return emu_sizes(&{n}, out); }}\n" for n in names)
    return '#include "cuda_emu.h"\n' + code + "\n" + exports


def _build(code: str, options: tuple[str, ...], names: tuple[str, ...], workdir: Path) -> Any:
    key = (code, options, names)
    lib = _LIBS.get(key)
    if lib is None:
        cxx = compiler()
        assert cxx is not None, "no host C++ compiler"
        src = _host_source(code, list(names))
        shim = (HERE / "cuda_emu.h").read_text()
        digest = hashlib.sha256((shim + src + " ".join(options)).encode()).hexdigest()[:16]
        so = workdir / f"emu_{digest}.so"
        if not so.exists():
            flags = [o for o in options if o.startswith(("-I", "-D"))]
            cpp, tmp = workdir / f"emu_{digest}.cpp", workdir / f"emu_{digest}.{os.getpid()}.so"
            cpp.write_text(src)
            subprocess.run([cxx, "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread",
                            "-w", f"-I{HERE}", *flags, str(cpp), "-o", str(tmp)], check=True,
                           capture_output=True, text=True)
            tmp.replace(so)  # whole or absent: another process may build the same
        lib = _LIBS[key] = ctypes.CDLL(str(so))
    return lib


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def _dim3(v: Any) -> Dim3:
    t = tuple(v) if isinstance(v, tuple | list) else (v,)
    t = t + (1,) * (3 - len(t))
    return Dim3(*(int(a) for a in t))


def _arg(a: Any) -> Any:
    """A kernel argument as the ctypes value its parameter reads."""
    if isinstance(a, np.ndarray):
        assert a.flags.c_contiguous, "kernels take contiguous buffers"
        return ctypes.c_void_p(a.ctypes.data)
    if isinstance(a, np.generic):
        return _CTYPES[a.dtype](a.item())
    raise TypeError(f"kernel argument of type {type(a).__name__}")


class Capture:
    """Stream capture as CUDA does it, on the host: while a stream captures, launches, GEMMs,
    fills and copies are recorded instead of run (a graph replays them), and allocating
    fails, as it must not happen inside a captured step."""

    def __init__(self) -> None:
        self.recording: list[Any] | None = None

    def run(self, call: Any) -> None:
        if self.recording is None:
            call()
        else:
            self.recording.append(call)


CAPTURE = Capture()


class Graph:
    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    def launch(self, stream: Any = None) -> None:
        for call in self.calls:
            call()


class Stream:
    def __init__(self, non_blocking: bool = False) -> None:
        self.ptr = 0

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def begin_capture(self) -> None:
        assert CAPTURE.recording is None, "a capture is already under way"
        CAPTURE.recording = []

    def end_capture(self) -> Graph:
        calls, CAPTURE.recording = CAPTURE.recording, None
        return Graph(calls or [])

    def is_capturing(self) -> bool:
        return CAPTURE.recording is not None

    def synchronize(self) -> None:
        return None


class EmuKernel:
    """A compiled instantiation, called as CuPy calls a RawKernel."""

    def __init__(self, fn: Any, name: str, sizes: list[int]) -> None:
        self.fn, self.name, self.sizes = fn, name, sizes
        self.max_dynamic_shared_size_bytes = 0
        self.launches = 0

    def __call__(self, grid: Any, block: Any, args: tuple[Any, ...], shared_mem: int = 0) -> None:
        threads = int(np.prod(block))
        assert 0 < threads <= 1024 and threads % 32 == 0, f"{self.name}: block {block}"
        limit = max(48 << 10, self.max_dynamic_shared_size_bytes)
        assert shared_mem <= limit, f"{self.name}: {shared_mem} bytes of shared memory"
        vals = [_arg(a) for a in args]
        got = [ctypes.sizeof(v) for v in vals]
        assert got == self.sizes, f"{self.name}: argument sizes {got}, parameters {self.sizes}"
        ptrs = (ctypes.c_void_p * max(len(vals), 1))(*[ctypes.addressof(v) for v in vals])
        g, b = _dim3(grid), _dim3(block)

        def launch() -> None:
            self.fn(g, b, ptrs)
            self.launches += 1

        launch.keep = (vals, ptrs)  # type: ignore[attr-defined]  # alive while recorded
        CAPTURE.run(launch)


def _family_instances() -> dict[str, list[str]]:
    """Source text -> every instantiation its launchers use (the NVRTC check's table), so a
    family is built for the host once, not once per kernel."""
    from aicf_induct.kernels.cuda.sources import act_defines, code

    # the script imports its folder's helpers as top-level modules, as `python
    # benchmarks/X.py` runs it: without the folder on the path this file failed unless a
    # test of tests/benchmarks (which adds it) happened to be collected first
    folder = str(Path(__file__).resolve().parents[2] / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    from benchmarks.cuda_compile_check import families, instantiations

    table = instantiations(sorted(act_defines().values()))
    return {code(f): table.get(f.file, []) for f in families()}


class EmuModule:
    def __init__(self, workdir: Path, code: str, options: tuple[str, ...],
                 name_expressions: list[str]) -> None:
        known = _family_instances().get(code, [])
        names = known + [n for n in name_expressions if n not in known]
        self.lib = _build(code, tuple(options), tuple(names), workdir)

    def get_function(self, name: str) -> EmuKernel:
        fn = getattr(self.lib, _symbol(name))
        fn.argtypes = [Dim3, Dim3, ctypes.c_void_p]
        sizes = (ctypes.c_int * 64)()
        n = getattr(self.lib, _symbol(name) + "_sizes")(sizes)
        return EmuKernel(fn, name, list(sizes[:n]))


def gemm_batched(transa: int, transb: int, m: int, n: int, k: int, a: Any, lda: int,
                 stride_a: int, b: Any, ldb: int, stride_b: int, c: Any, ldc: int,
                 stride_c: int, batch: int) -> None:
    """cuBLAS's strided-batched GEMM in NumPy, column-major, with its argument rules."""
    ra, rb = (m, k) if transa == gemm.OP_N else (k, m), (k, n) if transb == gemm.OP_N else (n, k)
    assert lda >= max(1, ra[0]) and ldb >= max(1, rb[0]) and ldc >= max(1, m), (lda, ldb, ldc)

    def mat(x: Any, off: int, rows: int, cols: int, ld: int) -> Any:
        flat = x.reshape(-1)
        need = off + (cols - 1) * ld + rows
        assert need <= flat.size, f"GEMM operand reads past its buffer ({need} > {flat.size})"
        s = x.itemsize
        return np.lib.stride_tricks.as_strided(flat[off:], (rows, cols), (s, ld * s))

    for i in range(batch):
        opa = mat(a, i * stride_a, *ra, lda)
        opb = mat(b, i * stride_b, *rb, ldb)
        opa = opa if transa == gemm.OP_N else opa.T
        opb = opb if transb == gemm.OP_N else opb.T
        mat(c, i * stride_c, m, n, ldc)[...] = opa @ opb


def gemm_recorded(*args: Any, ws: Any) -> None:
    # the instruction's own workspace, allocated before any capture (launch.gemm_workspace)
    assert isinstance(ws, np.ndarray) and ws.nbytes > 0, "a GEMM without its workspace"
    CAPTURE.run(lambda: gemm_batched(*args))


def gemm_one(precision: str, transa: int, transb: int, m: int, n: int, k: int, a: Any,
             lda: int, b: Any, ldb: int, c: Any, ldc: int, *, ws: Any) -> None:
    gemm_recorded(transa, transb, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, 1, ws=ws)


class DevArray(np.ndarray):
    """A NumPy array standing for a device array: `.data.ptr` and `.get()` as CuPy's."""

    @property
    def data(self) -> Any:  # type: ignore[override]
        return types.SimpleNamespace(ptr=self.ctypes.data)

    def get(self) -> np.ndarray:
        return np.array(self.view(np.ndarray))

    def fill(self, value: Any) -> None:
        CAPTURE.run(lambda: np.ndarray.fill(self, value))


def _device(make: Any) -> Any:
    def run(*args: Any, **kw: Any) -> DevArray:
        assert CAPTURE.recording is None, "allocation while a CUDA graph is captured"
        a = np.asarray(make(*args, **kw))
        return (a if a.flags.c_contiguous else a.copy()).view(DevArray)  # 0-d stays 0-d

    return run


def _copyto(dst: Any, src: Any, **kw: Any) -> None:
    CAPTURE.run(lambda: np.copyto(dst, src, **kw))


def _add(a: Any, b: Any, out: Any) -> None:
    CAPTURE.run(lambda: np.add(a, b, out=out))


def fake_cupy(workdir: Path) -> types.ModuleType:
    """A `cupy` whose arrays are NumPy's and whose RawModule builds for the host."""
    cp = types.ModuleType("cupy")
    for name in ("empty", "zeros", "full", "ones", "array"):
        setattr(cp, name, _device(getattr(np, name)))
    cp.asarray = _device(np.array)  # type: ignore[attr-defined]  # a copy: device memory
    for name in ("uint32", "int64", "float32", "float64"):
        setattr(cp, name, getattr(np, name))
    cp.copyto = _copyto  # type: ignore[attr-defined]
    cp.add = _add  # type: ignore[attr-defined]
    cp.ndarray = DevArray  # type: ignore[attr-defined]
    cp.RawModule = lambda code, options, name_expressions: EmuModule(  # type: ignore[attr-defined]
        workdir, code, options, name_expressions)
    stream = Stream()
    runtime = types.SimpleNamespace(getDevice=lambda: 0, getDeviceCount=lambda: 1)
    cp.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        runtime=runtime, get_current_stream=lambda: stream, Stream=Stream)
    return cp


@contextmanager
def emulated(workdir: Path) -> Iterator[types.ModuleType]:
    """Within: `import cupy` gives the stand-in, kernels compile for the host, GEMMs run in
    NumPy; the compile caches are swapped for empty ones and restored after (a real GPU's
    compiled kernels never mix with emulated ones)."""
    cp = fake_cupy(workdir)
    saved = (sys.modules.get("cupy"), cuda_compile._FUNCTIONS, cuda_compile._DEVICES,
             gemm.cublas_gemm, gemm.cublas_gemm_batched)
    sys.modules["cupy"] = cp
    cuda_compile._FUNCTIONS = {}
    cuda_compile._DEVICES = {0: cuda_compile.DeviceInfo(0, "emulator", 90, 2, 227 << 10)}
    gemm.cublas_gemm = gemm_one  # type: ignore[assignment]
    gemm.cublas_gemm_batched = gemm_recorded  # type: ignore[assignment]
    try:
        yield cp
    finally:
        if saved[0] is None:
            sys.modules.pop("cupy", None)
        else:
            sys.modules["cupy"] = saved[0]
        cuda_compile._FUNCTIONS, cuda_compile._DEVICES = saved[1], saved[2]
        gemm.cublas_gemm, gemm.cublas_gemm_batched = saved[3], saved[4]
