"""cuda tier: the GEMM variants' workspaces under the GPU engine's conditions.

Until the twenty-fourth sitting, cuBLASLt calls shared one 32 MiB workspace while the GPU
engine runs many runs' steps on concurrent streams: on an H200, 271 of 320 weight gradients
on 32 streams differed from one stream's bits, and a second shape did not finish within
100 s (`gemm_workspace_diag.py`). And `gemm.cublas_gemm`'s cublasSetStream reset the
handle's workspace, so under a capture cuBLAS allocated one itself (memory nodes: the
step's graph could not be repeated as child nodes, CUresult 801, test_many_gpu's
order-dependent failure). Each GEMM instruction now brings its own workspace
(`launch.gemm_workspace`)."""

from __future__ import annotations

import collections
import ctypes

import numpy as np
import pytest

from aicf_induct.kernels.cuda.launch import GEMM_WORKSPACE_BYTES
from aicf_induct.runtime.cuda_step import capture

pytestmark = pytest.mark.cuda
cp = pytest.importorskip("cupy")

STREAMS, ROUNDS = 32, 20
SHAPES = [(4096, 64, 64), (8192, 16, 16), (2048, 128, 256), (16384, 32, 8)]  # M, N, K


def node_types(graph: object) -> collections.Counter[int]:
    """CUgraphNodeType counts of a captured CuPy graph (10: memory allocation, 11: free)."""
    from aicf_induct.kernels.cuda.graph_repeat import _driver

    lib, raw = _driver(), ctypes.c_void_p(int(graph.graph))  # type: ignore[attr-defined]
    lib.cuGraphGetNodes.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.POINTER(ctypes.c_size_t)]
    lib.cuGraphNodeGetType.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    n = ctypes.c_size_t(0)
    assert lib.cuGraphGetNodes(raw, None, ctypes.byref(n)) == 0
    nodes = (ctypes.c_void_p * n.value)()
    assert lib.cuGraphGetNodes(raw, nodes, ctypes.byref(n)) == 0
    out: collections.Counter[int] = collections.Counter()
    for node in nodes:
        t = ctypes.c_int(-1)
        assert lib.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(t)) == 0
        out[t.value] += 1
    return out


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_lt_weight_gradients_on_concurrent_streams_equal_one_stream_s(shape) -> None:
    from aicf_induct.kernels.cuda import lt

    m, n, k = shape
    rng = np.random.default_rng(m + n + k)
    gs = [cp.asarray(rng.standard_normal((m, n), dtype=np.float32)) for _ in range(STREAMS)]
    xs = [cp.asarray(rng.standard_normal((m, k), dtype=np.float32)) for _ in range(STREAMS)]
    gw = [cp.empty((n, k), np.float32) for _ in range(STREAMS)]
    gb = [cp.empty((n,), np.float32) for _ in range(STREAMS)]
    ws = [cp.empty(GEMM_WORKSPACE_BYTES, np.uint8) for _ in range(STREAMS)]  # one a run
    alone = []
    for s in range(STREAMS):  # one at a time on the null stream: the reference bits
        assert lt.wgrad_bgrad("fp32", gs[s], xs[s], gw[s], gb[s], ws=ws[s])
        cp.cuda.Device().synchronize()
        alone.append((gw[s].get(), gb[s].get()))
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(STREAMS)]
    graphs = []
    for s in range(STREAMS):
        with streams[s]:
            graph, error = capture(
                lambda s=s: lt.wgrad_bgrad("fp32", gs[s], xs[s], gw[s], gb[s], ws=ws[s]), sync=True)
        assert graph is not None, error
        graphs.append(graph)
    for launch in ("eager", "graphs"):
        for _ in range(ROUNDS):
            for s in range(STREAMS):
                if launch == "graphs":
                    graphs[s].launch(streams[s])
                else:
                    with streams[s]:
                        lt.wgrad_bgrad("fp32", gs[s], xs[s], gw[s], gb[s], ws=ws[s])
            cp.cuda.Device().synchronize()
            for s in range(STREAMS):
                np.testing.assert_array_equal(gw[s].get(), alone[s][0], err_msg=launch)
                np.testing.assert_array_equal(gb[s].get(), alone[s][1], err_msg=launch)


def test_a_captured_cublas_gemm_holds_no_memory_nodes() -> None:
    from aicf_induct.kernels.cuda.gemm import xwt

    rng = np.random.default_rng(0)
    x = cp.asarray(rng.standard_normal((512, 64), dtype=np.float32))
    w = cp.asarray(rng.standard_normal((128, 64), dtype=np.float32))
    out = cp.empty((512, 128), np.float32)
    ws = cp.empty(GEMM_WORKSPACE_BYTES, np.uint8)
    xwt("fp32", x, w, out, ws=ws)  # warm: the handle exists before the capture
    graph, error = capture(lambda: xwt("fp32", x, w, out, ws=ws))
    assert graph is not None, error
    types = node_types(graph)
    assert types[10] == 0 and types[11] == 0, f"memory nodes in the graph: {dict(types)}"
