"""The GPU kernels of the ops beyond MLPs, case by case: each kernel's forward and VJP against
the op table's reference in float64, on fresh random inputs, outputs and gradients poisoned
with NaN first (an element a kernel fails to write fails the comparison). Run with real CuPy
by the cuda tier (test_cuda_new_ops.py) and with the CPU emulator by test_cuda_emulated.py:
`dev` is the CuPy module either way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aicf_induct.ir.graph import TensorType
from aicf_induct.ir.ops import OPS, OpContext
from aicf_induct.kernels import REGISTRY, KernelQuery
from tests.kernels.cuda_helpers import assert_close, host, tol

Inputs = tuple[list[np.ndarray], dict[str, np.ndarray]]
Maker = Callable[[np.random.Generator, str], Inputs]


@dataclass(frozen=True)
class Case:
    id: str
    op: str
    make: Maker  # (rng, dtype) -> (inputs, params)
    attrs: dict[str, Any] = field(default_factory=dict)
    needs: tuple[bool, ...] = (True,)
    training: bool = True


def _normal(rng: np.random.Generator, dtype: str, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (scale * rng.normal(size=shape)).astype(dtype)


def _attention(b: int, s: int, d: int, bias: bool = True) -> Maker:
    def make(rng: np.random.Generator, dtype: str) -> Inputs:
        params = {"in_weight": _normal(rng, dtype, 3 * d, d, scale=d ** -0.5),
                  "out_weight": _normal(rng, dtype, d, d, scale=d ** -0.5)}
        if bias:
            params |= {"in_bias": _normal(rng, dtype, 3 * d), "out_bias": _normal(rng, dtype, d)}
        return [_normal(rng, dtype, b, s, d)], params

    return make


def _embedding(shape: tuple[int, ...], v: int, d: int) -> Maker:
    def make(rng: np.random.Generator, dtype: str) -> Inputs:
        ids = rng.integers(0, v, size=shape)  # few rows: ids repeat, their gradients add up
        return [ids], {"weight": _normal(rng, dtype, v, d)}

    return make


def _tokenizer(b: int, f: int, d: int, bias: bool) -> Maker:
    def make(rng: np.random.Generator, dtype: str) -> Inputs:
        params = {"weight": _normal(rng, dtype, f, d)}
        if bias:
            params["bias"] = _normal(rng, dtype, f, d)
        return [_normal(rng, dtype, b, f)], params

    return make


def _conv(x: tuple[int, int, int, int], o: int, k: tuple[int, int], bias: bool) -> Maker:
    def make(rng: np.random.Generator, dtype: str) -> Inputs:
        params = {"weight": _normal(rng, dtype, o, x[1], *k, scale=0.3)}
        if bias:
            params["bias"] = _normal(rng, dtype, o)
        return [_normal(rng, dtype, *x)], params

    return make


def _tensors(*shapes: tuple[int, ...], ties: bool = False) -> Maker:
    def make(rng: np.random.Generator, dtype: str) -> Inputs:
        if ties:  # few distinct values: windows hold several maxima
            return [rng.integers(0, 3, size=s).astype(dtype) for s in shapes], {}
        return [_normal(rng, dtype, *s) for s in shapes], {}

    return make


CASES = [
    Case("attention", "attention", _attention(5, 9, 16), {"heads": 2}),
    Case("attention_dropout", "attention", _attention(3, 13, 24), {"heads": 3, "dropout": 0.2}),
    Case("attention_dropout_eval", "attention", _attention(3, 13, 24),
         {"heads": 3, "dropout": 0.2}, training=False),
    Case("attention_64_tokens_64_wide_heads", "attention", _attention(2, 64, 128),
         {"heads": 2, "dropout": 0.1}),
    Case("attention_33_tokens_no_bias_no_gx", "attention", _attention(4, 33, 8, bias=False),
         {"heads": 1, "bias": False}, needs=(False,)),
    Case("embedding", "embedding", _embedding((6, 10), 7, 5),
         {"num_embeddings": 7, "embedding_dim": 5}, needs=(False,)),
    Case("embedding_3d_ids", "embedding", _embedding((4, 3, 2), 50, 33),
         {"num_embeddings": 50, "embedding_dim": 33}, needs=(False,)),
    Case("numeric_tokenizer", "numeric_tokenizer", _tokenizer(70, 6, 12, True), {"d_token": 12}),
    Case("numeric_tokenizer_no_bias", "numeric_tokenizer", _tokenizer(9, 3, 40, False),
         {"d_token": 40, "bias": False}),
    Case("conv2d_3x3_pad1", "conv2d", _conv((4, 3, 8, 8), 5, (3, 3), True),
         {"out_channels": 5, "kernel_size": [3, 3], "padding": [1, 1]}),
    Case("conv2d_stride2_3x2_no_bias", "conv2d", _conv((3, 2, 9, 7), 4, (3, 2), False),
         {"out_channels": 4, "kernel_size": [3, 2], "stride": [2, 2], "padding": [0, 1],
          "bias": False}),
    Case("pool_max_2x2", "pool", _tensors((4, 3, 8, 8)),
         {"mode": "max", "kernel_size": [2, 2], "stride": [2, 2]}),
    Case("pool_max_3x3_pad1_ties", "pool", _tensors((3, 2, 7, 8), ties=True),
         {"mode": "max", "kernel_size": [3, 3], "stride": [2, 1], "padding": [1, 1]}),
    Case("pool_avg_3x3_pad1", "pool", _tensors((3, 2, 7, 6)),
         {"mode": "avg", "kernel_size": [3, 3], "stride": [1, 2], "padding": [1, 1]}),
    Case("mean_inner_axis", "mean", _tensors((7, 4, 5, 6)), {"axis": 1}),
    Case("mean_last_axis_keepdims", "mean", _tensors((9, 3, 70)), {"axis": -1, "keepdims": True}),
    Case("sum_middle_axis", "sum", _tensors((5, 4, 6, 3)), {"axis": 2}),
    Case("sum_last_axis", "sum", _tensors((300, 7)), {"axis": 1}),
    Case("concat_axis1", "concat", _tensors((6, 2, 5), (6, 3, 5), (6, 1, 5)), {"axis": 1},
         needs=(True, False, True)),
    Case("concat_last_axis", "concat", _tensors((6, 4, 2), (6, 4, 3)), {"axis": -1},
         needs=(True, True)),
    Case("matmul_batched", "matmul", _tensors((3, 2, 5, 7), (3, 2, 7, 4)), needs=(True, True)),
    Case("matmul_shared_right", "matmul", _tensors((4, 6, 7), (7, 3)), needs=(True, True)),
    Case("matmul_shared_right_lead_one", "matmul", _tensors((4, 6, 7), (1, 7, 3)),
         needs=(False, True)),
    Case("reshape", "reshape", _tensors((5, 4, 6)), {"shape": [3, -1]}),
    Case("transpose", "transpose", _tensors((5, 3, 4, 2)), {"perm": [0, 2, 3, 1]}),
]


def kernel(op: str, direction: str, shapes: tuple[tuple[int, ...], ...], dtype: str,
           attrs: dict[str, Any]) -> Any:
    """The `{op}.{direction}.cuda` kernel, asserting that it applies to these operands."""
    q = KernelQuery(op, direction, "cuda", dtype, shapes, attrs)
    name = f"{op}.{direction}.cuda"
    found = [k for k in REGISTRY.candidates(q) if k.name == name]
    assert found, f"{name} does not apply to {q}"
    return found[0]


@dataclass
class Bound:
    """One case on the device: operands, poisoned outputs, the calls, the references."""

    fwd: Callable[[], None]
    vjp: Callable[[], None]
    outputs: dict[str, Any]  # name -> device buffer the calls write
    refs: dict[str, np.ndarray]  # name -> the reference's value
    dtype: str

    def poison(self) -> None:
        for buf in self.outputs.values():
            buf.fill(np.nan)

    def check(self, what: str = "") -> None:
        for name, buf in self.outputs.items():
            assert_close(buf, self.refs[name], tol(self.dtype), f"{what} {name}")


def bind(dev: Any, case: Case, dtype: str) -> Bound:
    """Fresh inputs for `case`, the reference's forward and VJP in float64, and the CUDA
    kernels' calls on device copies, each with its own attrs (its own scratch)."""
    rng = np.random.default_rng()
    ins, params = case.make(rng, dtype)
    op = OPS[case.op]
    full = op.full_attrs(case.attrs)
    key = {"seed": int(rng.integers(2**31)), "step": int(rng.integers(10**6)),
           "node_id": f"blocks.{int(rng.integers(9))}.{case.op}", "training": case.training}
    in_types = [TensorType(a.shape, str(a.dtype)) for a in ins]
    out_dtype = op.infer(in_types, full).dtype
    wide = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in ins]
    p64 = {r: v.astype(np.float64) for r, v in params.items()}
    y_ref = op.forward(OpContext(**key), wide, p64, full)
    gy = rng.normal(size=y_ref.shape).astype(out_dtype)
    gi_ref, gp_ref = op.backward(OpContext(**key), wide, p64, y_ref, gy.astype(np.float64),
                                 full, case.needs)
    # the plan's queries: the operands' shapes (a VJP's: the inputs, the output, its
    # gradient) and the first operand's dtype (int64 for ids)
    shapes = tuple(a.shape for a in ins)
    qtype = str(ins[0].dtype)
    fwd_k = kernel(case.op, "fwd", shapes, qtype, full)
    vjp_k = kernel(case.op, "vjp", (*shapes, y_ref.shape, y_ref.shape), qtype, full)
    d_ins = [dev.asarray(a) for a in ins]
    d_params = {r: dev.asarray(v) for r, v in params.items()}
    y = dev.full(y_ref.shape, np.nan, dtype=out_dtype)
    d_gy = dev.asarray(gy)
    gins = [dev.full(a.shape, np.nan, dtype=dtype) if n else None
            for a, n in zip(ins, case.needs, strict=True)]
    gps = {r: dev.full(v.shape, np.nan, dtype=dtype) for r, v in params.items()}
    fa, va = dict(full), dict(full)

    def fwd() -> None:
        fwd_k.fn(OpContext(xp=dev, **key), d_ins, d_params, fa, y)

    def vjp() -> None:
        vjp_k.fn(OpContext(xp=dev, **key), d_ins, d_params, y, d_gy, va, case.needs, gins, gps)

    outputs = {"y": y} | {f"g_in{k}": g for k, g in enumerate(gins) if g is not None}
    outputs |= {f"g_{r}": g for r, g in gps.items()}
    refs = {"y": y_ref} | {f"g_in{k}": g for k, g in enumerate(gi_ref) if g is not None}
    refs |= {f"g_{r}": g for r, g in gp_ref.items()}
    return Bound(fwd, vjp, outputs, refs, dtype)


def run_case(dev: Any, case: Case, dtype: str) -> None:
    b = bind(dev, case, dtype)
    b.fwd()
    b.vjp()
    b.check(f"{case.id} {dtype}")


def replay_case(dev: Any, case: Case, dtype: str = "float32") -> None:
    """After one eager call (compiles, allocates the scratch), forward and VJP capture into
    one CUDA graph, and its replay, over outputs poisoned again, gives the reference."""
    b = bind(dev, case, dtype)
    b.fwd()
    b.vjp()
    stream = dev.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        b.fwd()
        b.vjp()
        graph = stream.end_capture()
    b.poison()
    graph.launch()  # on the current stream, after the poisoning (a non-blocking stream
    dev.cuda.get_current_stream().synchronize()  # would not wait for it)
    b.check(f"{case.id} replayed")


def embedding_out_of_range(dev: Any) -> None:
    """An id out of range gives a NaN row (the reference raises; the GPU cannot without a
    synchronisation) and adds nothing to the gradient; the other rows are right."""
    rng = np.random.default_rng()
    w = rng.normal(size=(5, 3))
    ids = np.array([[0, 4, -1], [5, 2, 2]])
    attrs = {"num_embeddings": 5, "embedding_dim": 3}
    fwd = kernel("embedding", "fwd", (ids.shape,), "int64", attrs)
    y = dev.full((2, 3, 3), 0.0)
    fwd.fn(OpContext(xp=dev), [dev.asarray(ids)], {"weight": dev.asarray(w)}, attrs, y)
    got = host(y)
    ok = (ids >= 0) & (ids < 5)
    np.testing.assert_array_equal(got[ok], w[ids[ok]])
    assert np.isnan(got[~ok]).all()
    g = rng.normal(size=(2, 3, 3))
    gw = dev.full((5, 3), np.nan)
    vjp = kernel("embedding", "vjp", (ids.shape,), "int64", attrs)
    vjp.fn(OpContext(xp=dev), [dev.asarray(ids)], {"weight": dev.asarray(w)}, y, dev.asarray(g),
           attrs, (False,), [None], {"weight": gw})
    want = np.zeros((5, 3))
    np.add.at(want, ids[ok], g[ok])
    np.testing.assert_allclose(host(gw), want, rtol=1e-12, atol=1e-15)


PLAN_SPECS = [  # (spec, input features): every new op the families use, in compiled plans
    ("ftt:depth=2,d_token=16,heads=4,attention_dropout=0.1", 7),
    ("cnn:stages=2,channels=4,kernel=3,pool=max,act=relu", 64),
]


def plan_steps(dev: Any, spec: str, n_in: int, steps: int) -> Any:
    """A family's graph trained a few steps by a GPU executor (fused plan, this registry) and
    by the NumPy one from the same parameters: equal losses and gradients (float64, 1e-10);
    every kernel of the GPU plan is a CUDA kernel (no reference fallback) and capturable.
    Returns the GPU executor."""
    from aicf_induct.frontend.families import parse_spec, spec_graph
    from aicf_induct.runtime.executor import Executor, store_for

    graph = spec_graph(parse_spec(spec), n_in, 3)
    ref = Executor(graph, store_for(graph, seed=1), loss="cross_entropy", seed=4)
    gpu = Executor(graph, store_for(graph, seed=1, xp=dev), loss="cross_entropy", seed=4,
                   device="cuda", xp=dev, fuse=True, registry=REGISTRY)
    rng = np.random.default_rng()
    for step in range(steps):
        x, y = rng.normal(size=(20, n_in)), rng.integers(0, 3, size=20)
        np.testing.assert_allclose(gpu.train_step(x, y, step), ref.train_step(x, y, step),
                                   rtol=1e-10)
        assert_close(gpu.store.grad, ref.store.grad, 1e-10, f"{spec} grads step {step}")
        ref.store.data -= 0.1 * ref.store.grad
        gpu.store.data -= 0.1 * gpu.store.grad
    plan = gpu.cached_plan("train", 20)
    assert plan is not None
    assert not [k for k in plan.kernel_names if k.endswith("reference")], plan.kernel_names
    assert plan.capturable
    return gpu
