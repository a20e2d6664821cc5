"""A captured CUDA graph replayed k times in a row by one launch: a graph of k child-graph
nodes in a chain, built with the driver API (CuPy wraps capture, not graph building).

Capturing k steps by running the step's Python k times inside a stream capture costs k
times the host work of one step (~1.5 ms each on the engine's models); adding k child
nodes that point at the one step's captured graph costs a few microseconds each and the
instantiation. The child nodes are copies of the step's graph, so they launch the same
kernels on the same buffers, in the same order, as k replays of it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from typing import Any


class GraphBuildError(RuntimeError):
    """The driver refused to build or launch the repeated graph (the caller falls back to a
    capture)."""


@functools.cache
def _driver() -> Any:
    lib = ctypes.CDLL("libcuda.so.1")
    vp, size, u64 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_ulonglong
    lib.cuGraphCreate.argtypes = [ctypes.POINTER(vp), ctypes.c_uint]
    lib.cuGraphAddChildGraphNode.argtypes = [ctypes.POINTER(vp), vp, ctypes.POINTER(vp), size,
                                             vp]
    lib.cuGraphInstantiateWithFlags.argtypes = [ctypes.POINTER(vp), vp, u64]
    lib.cuGraphLaunch.argtypes = [vp, vp]
    lib.cuGraphExecDestroy.argtypes = [vp]
    lib.cuGraphDestroy.argtypes = [vp]
    for fn in (lib.cuGraphCreate, lib.cuGraphAddChildGraphNode, lib.cuGraphInstantiateWithFlags,
               lib.cuGraphLaunch, lib.cuGraphExecDestroy, lib.cuGraphDestroy):
        fn.restype = ctypes.c_int
    return lib


def _check(rc: int, call: str) -> None:
    if rc != 0:
        raise GraphBuildError(f"{call} returned CUresult {rc}")


class RepeatedGraph:
    """`child` (a CuPy graph from a stream capture) k times in a chain, launched as one."""

    def __init__(self, child: Any, k: int) -> None:
        raw = int(getattr(child, "graph", 0) or 0)
        if not raw:
            raise GraphBuildError("this CuPy does not keep a captured graph's cudaGraph_t")
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        try:
            lib = _driver()
        except (OSError, AttributeError) as err:
            raise GraphBuildError(f"the CUDA driver's graph API is not available: {err}") from err
        self.k = k
        self._lib = lib
        self._child = child  # the copies are independent; kept for the buffers' owners' sake
        self._graph = ctypes.c_void_p()
        self._exec = ctypes.c_void_p()
        _check(lib.cuGraphCreate(ctypes.byref(self._graph), 0), "cuGraphCreate")
        try:
            prev = ctypes.c_void_p()
            for i in range(k):
                node = ctypes.c_void_p()
                deps = ctypes.byref(prev) if i else None
                _check(lib.cuGraphAddChildGraphNode(ctypes.byref(node), self._graph, deps,
                                                    1 if i else 0, ctypes.c_void_p(raw)),
                       "cuGraphAddChildGraphNode")
                prev = node
            _check(lib.cuGraphInstantiateWithFlags(ctypes.byref(self._exec), self._graph, 0),
                   "cuGraphInstantiateWithFlags")
        except BaseException:
            self.close()
            raise

    def launch(self, stream: Any) -> None:
        """Queue the k copies on `stream` (a CuPy stream)."""
        _check(self._lib.cuGraphLaunch(self._exec, ctypes.c_void_p(stream.ptr)), "cuGraphLaunch")

    def close(self) -> None:
        if self._exec.value:
            self._lib.cuGraphExecDestroy(self._exec)
            self._exec = ctypes.c_void_p()
        if self._graph.value:
            self._lib.cuGraphDestroy(self._graph)
            self._graph = ctypes.c_void_p()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter shutdown the driver may be gone
            self.close()


def repeated(child: Any, k: int) -> tuple[RepeatedGraph | None, str]:
    """(the repeated graph, "") or (None, why the driver could not build it)."""
    try:
        return RepeatedGraph(child, k), ""
    except GraphBuildError as err:
        return None, str(err)
