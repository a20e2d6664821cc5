"""cuda tier: the GEMM variants' workspaces under the GPU engine's conditions.

Until the twenty-fourth sitting, cuBLASLt calls shared one 32 MiB workspace while the GPU
engine runs many runs' steps on concurrent streams: on an H200, 271 of 320 weight gradients
on 32 streams differed from one stream's bits, and a second shape did not finish within
100 s (`gemm_workspace_diag.py`). And `gemm.cublas_gemm`'s cublasSetStream reset the
handle's workspace, so under a capture cuBLAS allocated one itself (memory nodes: the
step's graph could not be repeated as child nodes, CUresult 801, test_many_gpu's
order-dependent failure). Each GEMM instruction now brings its own workspace
(`launch.gemm_workspace`): 1 MiB, or 32 MiB from 2^30 multiply-adds (twenty-fifth sitting:
cuBLAS's split-K picks there are 4-5 % faster on an H200), which only grows."""

from __future__ import annotations

import collections
import ctypes

import numpy as np
import pytest

from aicf_induct.ir.ops import OpContext
from aicf_induct.kernels import REGISTRY, KernelQuery
from aicf_induct.kernels.cuda.launch import (
    GEMM_WORKSPACE_BYTES,
    LARGE_GEMM_MACS,
    LARGE_GEMM_WORKSPACE_BYTES,
    gemm_workspace,
)
from aicf_induct.kernels.fused import REFERENCES
from aicf_induct.runtime.cuda_step import capture
from tests.kernels.cuda_helpers import assert_close, poisoned, tol

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


def test_a_large_gemm_gets_the_large_workspace_which_never_shrinks() -> None:
    attrs: dict = {}
    small = gemm_workspace(attrs, LARGE_GEMM_MACS - 1)
    assert small.nbytes == GEMM_WORKSPACE_BYTES
    large = gemm_workspace(attrs, LARGE_GEMM_MACS)
    assert large.nbytes == LARGE_GEMM_WORKSPACE_BYTES
    again = gemm_workspace(attrs, 1)  # a smaller batch later: the buffer a graph holds stays
    assert again.data.ptr == large.data.ptr


@pytest.mark.parametrize("variant,precision", [("cublas", "fp32"), ("cublaslt", "fp32"),
                                               ("cublaslt", "tf32")])
def test_a_large_linear_layer_with_the_large_workspace_matches_numpy(variant: str,
                                                                    precision: str) -> None:
    m, k, n = 4096, 512, 1024  # 2^31 multiply-adds: the large workspace
    assert m * k * n >= LARGE_GEMM_MACS
    rng = np.random.default_rng()
    x = rng.normal(size=(m, k)).astype(np.float32)
    params = {"weight": (rng.normal(size=(n, k)) / np.sqrt(k)).astype(np.float32),
              "bias": rng.normal(size=n).astype(np.float32)}
    g = rng.normal(size=(m, n)).astype(np.float32)
    attrs = {"act": "relu", "act_attrs": {}, "precision": precision, "out_features": n,
             "bias": True}
    p64 = {r: v.astype(np.float64) for r, v in params.items()}
    ref_a, ref_z = np.empty((m, n)), np.empty((m, n))
    REFERENCES["linear_act"](OpContext(), [x.astype(np.float64)], [ref_a, ref_z], p64, {},
                             attrs)
    ref_g = {r: np.empty(v.shape) for r, v in params.items()}
    ref_gx = np.empty((m, k))
    REFERENCES["act_linear_bwd"](OpContext(), [x.astype(np.float64), g.astype(np.float64),
                                               ref_a], [ref_gx, None], p64, ref_g, attrs)
    dev = {r: cp.asarray(v) for r, v in params.items()}
    t = tol("float32", precision)
    fwd_attrs, bwd_attrs = dict(attrs), dict(attrs)
    fwd = _kernel("linear_act", f"linear_act.{variant}", m, k, fwd_attrs)
    a = poisoned(cp, (m, n), np.float32)
    fwd.fn(OpContext(xp=cp), [cp.asarray(x)], [a, None], dev, {}, fwd_attrs)
    assert_close(a, ref_a, t, f"{variant} {precision} forward")
    bwd = _kernel("act_linear_bwd", f"act_linear_bwd.{variant}", m, k, bwd_attrs)
    gx = poisoned(cp, (m, k), np.float32)
    grads = {r: poisoned(cp, v.shape, np.float32) for r, v in params.items()}
    bwd.fn(OpContext(xp=cp), [cp.asarray(x), cp.asarray(g), cp.asarray(ref_a, np.float32)],
           [gx, None], dev, grads, bwd_attrs)
    cp.cuda.get_current_stream().synchronize()
    assert_close(gx, ref_gx, t, f"{variant} {precision} gx")
    for r in params:
        assert_close(grads[r], ref_g[r], t, f"{variant} {precision} d{r}")
    for used in (fwd_attrs, bwd_attrs):
        assert used["_scratch"]["gemm_workspace"].nbytes == LARGE_GEMM_WORKSPACE_BYTES


def _kernel(op: str, name: str, m: int, k: int, attrs: dict):
    q = KernelQuery(op, "fused", "cuda", "float32", ((m, k),), attrs)
    found = [c for c in REGISTRY.candidates(q) if c.name == name]
    assert found, f"{name} does not apply to {q}"
    return found[0]
