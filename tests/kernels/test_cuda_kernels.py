"""cuda tier: every CUDA kernel against its NumPy reference on fresh random inputs (fp32 to
1e-5 relative, fp64 to 1e-12, tf32 3e-3, bf16 2e-2; NaN never; outputs poisoned with NaN
before each run, so an unwritten element fails)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from aicf_induct.ir.ops import OPS, OpContext, activation
from aicf_induct.kernels import REGISTRY, KernelQuery
from aicf_induct.kernels.fused import REFERENCES, act_forward
from aicf_induct.runtime.optimizers import make_optimizer
from aicf_induct.runtime.params import ParamStore
from tests.kernels.cuda_helpers import assert_close, host, poisoned, tol

pytestmark = pytest.mark.cuda
cp = pytest.importorskip("cupy")

ACTS = [None, "relu", "gelu", "gelu_tanh", "tanh", "sigmoid", "silu"]


def _act(a: str | None) -> tuple[str | None, dict]:
    if a == "gelu_tanh":
        return "gelu", {"approximate": "tanh"}
    return a, ({"approximate": "none"} if a == "gelu" else {})


def _kernel(op: str, direction: str, name: str, q_shapes, dtype: str, attrs: dict):
    q = KernelQuery(op, direction, "cuda", dtype, q_shapes, attrs)
    found = [k for k in REGISTRY.candidates(q) if k.name == name]
    assert found, f"{name} does not apply to {q}"
    return found[0]


def _fwd_cases():
    out = []
    for variant in ("cublas", "tiled64", "tiled32"):
        for act in ACTS:
            out.append((variant, act, "float32", "fp32"))
        for act in (None, "relu", "gelu"):
            out.append((variant, act, "float64", "fp32"))
    for act in (None, "relu"):
        out += [("cublaslt", act, "float32", "fp32"), ("cublaslt", act, "float32", "tf32")]
    for variant in ("cublas", "wmma"):
        for act in (None, "relu", "gelu_tanh"):
            out.append((variant, act, "float32", "tf32"))
        for act in ("relu", "silu"):
            out.append((variant, act, "float32", "bf16"))
    return out


SHAPES = [(37, 19, 23, True), (256, 64, 2, False), (130, 70, 65, True),  # M, K, N, bias
          (512, 64, 128, True)]  # aligned: cuBLASLt's bias epilogues apply


@pytest.mark.parametrize("variant,act,dtype,precision", _fwd_cases())
def test_linear_act(variant: str, act: str | None, dtype: str, precision: str) -> None:
    rng = np.random.default_rng()
    name, act_attrs = _act(act)
    for m, k, n, bias in SHAPES:
        x = rng.normal(size=(m, k)).astype(dtype)
        params = {"weight": (rng.normal(size=(n, k)) / np.sqrt(k)).astype(dtype)}
        if bias:
            params["bias"] = rng.normal(size=n).astype(dtype)
        keep_z = name in ("gelu", "silu")
        attrs = {"act": name, "act_attrs": act_attrs, "precision": precision,
                 "out_features": n, "bias": bias}
        ref_a, ref_z = np.empty((m, n)), np.empty((m, n))
        REFERENCES["linear_act"](OpContext(), [x.astype(np.float64)], [ref_a, ref_z],
                                 {r: v.astype(np.float64) for r, v in params.items()}, {}, attrs)
        kern = _kernel("linear_act", "fused", f"linear_act.{variant}", ((m, k),), dtype, attrs)
        a, z = poisoned(cp, (m, n), dtype), poisoned(cp, (m, n), dtype) if keep_z else None
        kern.fn(OpContext(xp=cp), [cp.asarray(x)], [a, z],
                {r: cp.asarray(v) for r, v in params.items()}, {}, attrs)
        cp.cuda.get_current_stream().synchronize()
        t = tol(dtype, precision)
        assert_close(a, ref_a, t, f"{variant} {act} a {(m, k, n)}")
        if keep_z:
            assert_close(z, ref_z, t, f"{variant} {act} z")


@pytest.mark.parametrize("act", [None, "relu"])
def test_linear_act_cublaslt_with_the_pre_activation_kept(act: str | None) -> None:
    rng = np.random.default_rng()
    m, k, n = 300, 40, 24
    x = rng.normal(size=(m, k)).astype(np.float32)
    params = {"weight": (rng.normal(size=(n, k)) / np.sqrt(k)).astype(np.float32),
              "bias": rng.normal(size=n).astype(np.float32)}
    attrs = {"act": act, "act_attrs": {}, "precision": "fp32", "out_features": n, "bias": True}
    ref_a, ref_z = np.empty((m, n)), np.empty((m, n))
    REFERENCES["linear_act"](OpContext(), [x.astype(np.float64)], [ref_a, ref_z],
                             {r: v.astype(np.float64) for r, v in params.items()}, {}, attrs)
    kern = _kernel("linear_act", "fused", "linear_act.cublaslt", ((m, k),), "float32", attrs)
    a, z = poisoned(cp, (m, n), np.float32), poisoned(cp, (m, n), np.float32)
    kern.fn(OpContext(xp=cp), [cp.asarray(x)], [a, z],
            {r: cp.asarray(v) for r, v in params.items()}, {}, attrs)
    assert_close(a, ref_a, 1e-5, "a")
    assert_close(z, ref_z, 1e-5, "z")



@pytest.mark.parametrize("variant,precision", [("cublas", "fp32"), ("cublas", "tf32"),
                                               ("tiled64", "fp32"), ("tiled32", "fp32"),
                                               ("cublaslt", "fp32"), ("wmma", "tf32")])
def test_linear_act_of_no_activation_and_no_bias_writes_a_beside_z(variant: str,
                                                                   precision: str) -> None:
    """cuBLAS's variant wrote the product into z and left a unwritten (a fuzz found a all NaN,
    poisoned as it was): a is z when there is neither a bias nor an activation."""
    rng = np.random.default_rng()
    m, k, n = 65, 31, 33
    x = rng.normal(size=(m, k)).astype(np.float32)
    params = {"weight": (rng.normal(size=(n, k)) / np.sqrt(k)).astype(np.float32)}
    attrs = {"act": None, "act_attrs": {}, "precision": precision, "out_features": n,
             "bias": False}
    ref = x.astype(np.float64) @ params["weight"].astype(np.float64).T
    kern = _kernel("linear_act", "fused", f"linear_act.{variant}", ((m, k),), "float32", attrs)
    a, z = poisoned(cp, (m, n), np.float32), poisoned(cp, (m, n), np.float32)
    kern.fn(OpContext(xp=cp), [cp.asarray(x)], [a, z],
            {r: cp.asarray(v) for r, v in params.items()}, {}, attrs)
    assert_close(a, ref, tol("float32", precision), f"{variant} a")
    assert_close(z, ref, tol("float32", precision), f"{variant} z")


@pytest.mark.parametrize("op", ["linear_act", "act_linear_bwd"])
def test_cublaslt_does_not_take_a_batch_of_no_rows(op: str) -> None:
    """cuBLASLt refuses a GEMM of no rows (status 7); the registry gives that batch to the
    variants that take it."""
    attrs = {"act": "relu", "act_attrs": {}, "precision": "fp32", "out_features": 8,
             "bias": True}
    names = {kern.name for kern in REGISTRY.candidates(
        KernelQuery(op, "fused", "cuda", "float32", ((0, 16),), attrs))}
    assert f"{op}.cublas" in names and f"{op}.cublaslt" not in names
    assert f"{op}.cublaslt" in {kern.name for kern in REGISTRY.candidates(
        KernelQuery(op, "fused", "cuda", "float32", ((1, 16),), attrs))}

def _bwd_cases():
    out = []
    for variant in ("cublas", "tiled64", "tiled32"):
        for act in ACTS:
            out.append((variant, act, "float32", "fp32"))
        for act in (None, "silu"):
            out.append((variant, act, "float64", "fp32"))
    out += [("cublas", "relu", "float32", "tf32"), ("cublas", "gelu", "float32", "bf16")]
    for act in (None, "relu", "gelu", "silu"):
        out.append(("cublaslt", act, "float32", "fp32"))
    out += [("cublaslt", None, "float32", "tf32"), ("cublaslt", "relu", "float32", "tf32")]
    return out


@pytest.mark.parametrize("variant,act,dtype,precision", _bwd_cases())
def test_act_linear_bwd(variant: str, act: str | None, dtype: str, precision: str) -> None:
    rng = np.random.default_rng()
    name, act_attrs = _act(act)
    for (m, k, n, bias), need_gx in zip(SHAPES, (True, False, True, True), strict=True):
        x = rng.normal(size=(m, k)).astype(dtype)
        w = rng.normal(size=(n, k)).astype(dtype)
        g = rng.normal(size=(m, n)).astype(dtype)
        z = rng.normal(size=(m, n))
        from_output = name is not None and activation(name, act_attrs).from_output
        h = act_forward(np, z, name, act_attrs) if from_output else z
        h = h.astype(dtype)
        ins = [x, g] + ([h] if name else [])
        params = {"weight": w} | ({"bias": rng.normal(size=n).astype(dtype)} if bias else {})
        attrs = {"act": name, "act_attrs": act_attrs, "precision": precision,
                 "out_features": n, "bias": bias}
        ref = {r: np.empty(v.shape) for r, v in params.items()}
        ref_gx = np.empty((m, k))
        REFERENCES["act_linear_bwd"](OpContext(), [a.astype(np.float64) for a in ins],
                                     [ref_gx if need_gx else None, None],
                                     {r: v.astype(np.float64) for r, v in params.items()},
                                     ref, attrs)
        kern = _kernel("act_linear_bwd", "fused", f"act_linear_bwd.{variant}", ((m, k),),
                       dtype, attrs)
        gx = poisoned(cp, (m, k), dtype) if need_gx else None
        gz = poisoned(cp, (m, n), dtype) if name else None
        grads = {r: poisoned(cp, v.shape, dtype) for r, v in params.items()}
        kern.fn(OpContext(xp=cp), [cp.asarray(a) for a in ins], [gx, gz],
                {r: cp.asarray(v) for r, v in params.items()}, grads, attrs)
        cp.cuda.get_current_stream().synchronize()
        t = tol(dtype, precision)
        for r in params:
            assert_close(grads[r], ref[r], t, f"{variant} {act} g{r} {(m, k, n)}")
        if need_gx:
            assert_close(gx, ref_gx, t, f"{variant} {act} gx")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m,c,eps", [(37, 10, 0.0), (300, 100, 0.1), (256, 2, 0.0),
                                     (5000, 7, 0.05)])
def test_softmax_ce(dtype: str, m: int, c: int, eps: float) -> None:
    rng = np.random.default_rng()
    logits = (3 * rng.normal(size=(m, c))).astype(dtype)
    labels = rng.integers(0, c, size=m)
    gy = np.array(0.7, dtype=dtype)
    ref_l, ref_g = np.empty(()), np.empty((m, c))
    REFERENCES["softmax_ce"](OpContext(), [logits.astype(np.float64), labels,
                                           gy.astype(np.float64)], [ref_l, ref_g], {}, {},
                             {"label_smoothing": eps})
    kern = _kernel("softmax_ce", "fused", "softmax_ce.cuda", ((m, c), (m,), ()), dtype, {})
    loss, g = poisoned(cp, (), dtype), poisoned(cp, (m, c), dtype)
    kern.fn(OpContext(xp=cp), [cp.asarray(logits), cp.asarray(labels), cp.asarray(gy)],
            [loss, g], {}, {}, {"label_smoothing": eps})
    assert_close(loss, ref_l, tol(dtype), "loss")
    assert_close(g, ref_g, tol(dtype), "glogits")


@pytest.mark.parametrize("m,c", [(256, 2), (70000, 3)])
def test_softmax_ce_as_the_root_reads_no_seed(m: int, c: int) -> None:
    rng = np.random.default_rng()
    logits = rng.normal(size=(m, c)).astype(np.float32)
    labels = rng.integers(0, c, size=m)
    ref_l, ref_g = np.empty(()), np.empty((m, c))
    REFERENCES["softmax_ce"](OpContext(), [logits.astype(np.float64), labels, np.ones(())],
                             [ref_l, ref_g], {}, {}, {"label_smoothing": 0.0})
    kern = _kernel("softmax_ce", "fused", "softmax_ce.cuda", ((m, c), (m,)), "float32", {})
    loss, g = poisoned(cp, (), np.float32), poisoned(cp, (m, c), np.float32)
    attrs: dict = {"label_smoothing": 0.0}
    for _ in range(2):  # the second call reuses the block counter the first one reset
        kern.fn(OpContext(xp=cp), [cp.asarray(logits), cp.asarray(labels)], [loss, g], {}, {},
                attrs)
        assert_close(loss, ref_l, 1e-5, "loss")
        assert_close(g, ref_g, 1e-5, "glogits")


# -- op-level kernels against the op table ---------------------------------------------------

def _op_check(op: str, ins: list[np.ndarray], params: dict, attrs: dict, dtype: str,
              needs: tuple[bool, ...] = (True,)) -> None:
    """fwd and vjp of `op` on the GPU against the op table's reference in float64."""
    full = OPS[op].full_attrs(attrs)
    ctx64 = OpContext()
    ins64 = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in ins]
    p64 = {r: v.astype(np.float64) for r, v in params.items()}
    y_ref = OPS[op].forward(ctx64, ins64, p64, full)
    gy = np.random.default_rng().normal(size=np.shape(y_ref)).astype(dtype)
    gi_ref, gp_ref = OPS[op].backward(ctx64, ins64, p64, y_ref, gy.astype(np.float64), full,
                                      needs)
    dev_ins = [cp.asarray(a) for a in ins]
    dev_p = {r: cp.asarray(v) for r, v in params.items()}
    shapes = tuple(a.shape for a in ins)
    fwd = _kernel(op, "fwd", f"{op}.fwd.cuda", shapes, dtype, full)
    y = poisoned(cp, np.shape(y_ref), dtype)
    fwd.fn(OpContext(xp=cp), dev_ins, dev_p, dict(full), y)
    assert_close(y, y_ref, tol(dtype), f"{op} fwd")
    vjp = _kernel(op, "vjp", f"{op}.vjp.cuda", shapes, dtype, full)
    gins = [poisoned(cp, a.shape, dtype) if n else None for a, n in zip(ins, needs,
                                                                          strict=False)]
    gps = {r: poisoned(cp, v.shape, dtype) for r, v in params.items() if r in gp_ref}
    vjp.fn(OpContext(xp=cp), dev_ins, dev_p, y, cp.asarray(gy), dict(full), needs, gins, gps)
    for got, want in zip(gins, gi_ref, strict=False):
        if got is not None:
            assert_close(got, want, tol(dtype), f"{op} vjp input")
    for r, got in gps.items():
        assert_close(got, gp_ref[r], tol(dtype), f"{op} vjp {r}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op,attrs", [("relu", {}), ("gelu", {}), ("gelu", {"approximate": "tanh"}),
                                      ("tanh", {}), ("sigmoid", {}), ("silu", {})])
def test_activation_kernels(op: str, attrs: dict, dtype: str) -> None:
    x = (2 * np.random.default_rng().normal(size=(33, 17))).astype(dtype)
    _op_check(op, [x], {}, attrs, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("d,affine", [(17, True), (300, True), (64, False)])
def test_layernorm_kernels(d: int, affine: bool, dtype: str) -> None:
    rng = np.random.default_rng()
    x = (rng.normal(size=(3000, d)) * 2 + 1).astype(dtype)
    params = {"weight": rng.normal(size=d).astype(dtype),
              "bias": rng.normal(size=d).astype(dtype)} if affine else {}
    _op_check("layernorm", [x], params, {"affine": affine}, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m,d,affine,training", [(32, 17, True, True), (7, 300, True, True),
                                                 (33, 64, False, True), (1000, 40, True, False)])
def test_batchnorm_kernels(m: int, d: int, affine: bool, training: bool, dtype: str) -> None:
    """Forward (batch or running statistics), the running statistics' update in place, and
    the VJP, against the op table's reference in float64."""
    rng = np.random.default_rng()
    x = (rng.normal(size=(m, d)) * 2 + 1).astype(dtype)
    params = {"weight": rng.normal(size=d).astype(dtype),
              "bias": rng.normal(size=d).astype(dtype)} if affine else {}
    params["running_mean"] = rng.normal(size=d).astype(dtype)
    params["running_var"] = rng.uniform(0.5, 2.0, size=d).astype(dtype)
    op, full = OPS["batchnorm"], OPS["batchnorm"].full_attrs({"affine": affine})
    ctx64 = OpContext(training=training)
    p64 = {r: v.astype(np.float64) for r, v in params.items()}
    y_ref = op.forward(ctx64, [x.astype(np.float64)], p64, full)
    gy = rng.normal(size=(m, d)).astype(dtype)
    gi_ref, gp_ref = op.backward(OpContext(training=training), [x.astype(np.float64)], p64,
                                 y_ref, gy.astype(np.float64), full, (True,))
    dev_p = {r: cp.asarray(v) for r, v in params.items()}
    shapes = ((m, d),)
    y = poisoned(cp, (m, d), dtype)
    fwd = _kernel("batchnorm", "fwd", "batchnorm.fwd.cuda", shapes, dtype, full)
    fwd.fn(OpContext(xp=cp, training=training), [cp.asarray(x)], dev_p, dict(full), y)
    assert_close(y, y_ref, tol(dtype), "batchnorm fwd")
    for role in ("running_mean", "running_var"):
        want = ctx64.state_updates[role] if training else params[role]
        assert_close(dev_p[role], want, tol(dtype), role)
    if training:  # the backward of a training step sees the statistics it started from
        dev_p = {r: cp.asarray(v) for r, v in params.items()}
    gx = poisoned(cp, (m, d), dtype)
    gps = {r: poisoned(cp, (d,), dtype) for r in gp_ref}
    vjp = _kernel("batchnorm", "vjp", "batchnorm.vjp.cuda", shapes, dtype, full)
    vjp.fn(OpContext(xp=cp, training=training), [cp.asarray(x)], dev_p, y, cp.asarray(gy),
           dict(full), (True,), [gx], gps)
    assert_close(gx, gi_ref[0], tol(dtype), "batchnorm vjp input")
    for r, got in gps.items():
        assert_close(got, gp_ref[r], tol(dtype), f"batchnorm vjp {r}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_loss_and_add_kernels(dtype: str) -> None:
    rng = np.random.default_rng()
    p, t = rng.normal(size=(70, 3)).astype(dtype), rng.normal(size=(70, 3)).astype(dtype)
    _op_check("mse", [p, t], {}, {}, dtype, (True, False))
    logits, labels = rng.normal(size=(70, 5)).astype(dtype), rng.integers(0, 5, size=70)
    _op_check("cross_entropy", [logits, labels], {}, {"label_smoothing": 0.1}, dtype,
              (True, False))
    _op_check("add", [p, t], {}, {}, dtype, (True, True))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_masks_equal_the_reference_bit_for_bit(p: float, dtype: str) -> None:
    x = np.random.default_rng().normal(size=(1001, 7)).astype(dtype)
    attrs = {"p": p}
    for step, rank in ((0, 0), (5, 0), (123456, 0), (5, 1), (7, 3)):  # a rank keys it too
        ref_ctx = OpContext(seed=3, step=step, node_id="blocks.1.dropout", rank=rank)
        y_ref = OPS["dropout"].forward(ref_ctx, [x], {}, attrs)
        ctx = OpContext(xp=cp, seed=3, step=step, node_id="blocks.1.dropout", rank=rank)
        fwd = _kernel("dropout", "fwd", "dropout.fwd.cuda", ((1001, 7),), dtype, attrs)
        y = poisoned(cp, x.shape, dtype)
        fwd.fn(ctx, [cp.asarray(x)], {}, attrs, y)
        np.testing.assert_array_equal(host(y), y_ref)
        vjp = _kernel("dropout", "vjp", "dropout.vjp.cuda", ((1001, 7),), dtype, attrs)
        g = poisoned(cp, x.shape, dtype)
        vjp.fn(ctx, [cp.asarray(x)], {}, y, cp.asarray(x), attrs, (True,), [g], {})
        np.testing.assert_array_equal(host(g), y_ref)


def test_dropout_in_a_captured_graph_reads_the_step_from_the_device() -> None:
    x = np.random.default_rng().normal(size=(257, 5)).astype(np.float32)
    step_dev = cp.zeros(1, dtype=cp.int64)
    ctx = OpContext(xp=cp, seed=1, node_id="d", device_step=step_dev)
    fwd = _kernel("dropout", "fwd", "dropout.fwd.cuda", ((257, 5),), "float32", {"p": 0.3})
    xd, y = cp.asarray(x), cp.zeros(x.shape, dtype=cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        fwd.fn(ctx, [xd], {}, {"p": 0.3}, y)
        graph = stream.end_capture()
    for step in (4, 9):
        step_dev.fill(step)
        graph.launch()
        ref = OPS["dropout"].forward(OpContext(seed=1, step=step, node_id="d"), [x], {},
                                     {"p": 0.3})
        np.testing.assert_array_equal(host(y), ref)
    assert zlib.crc32(b"d")  # the node id keys the stream


# -- the optimizer kernel ---------------------------------------------------------------------

OPTIMIZERS = [
    ("adam", {}, 0.0), ("adam", {"weight_decay": 0.01}, 1.0),
    ("adamw", {"weight_decay": 0.05}, 0.0), ("adamw", {}, 0.3),
    ("sgd", {"momentum": 0.9}, 0.5), ("sgd", {"momentum": 0.9, "nesterov": True,
                                              "weight_decay": 1e-3}, 0.0),
    ("sgd", {"momentum": 0.9, "dampening": 0.1}, 0.0), ("sgd", {}, 0.0),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw,clip", OPTIMIZERS)
def test_fused_optimizer_matches_the_numpy_optimizer(name: str, kw: dict, clip: float,
                                                     dtype: str) -> None:
    _check_optimizer(name, kw, clip, dtype,
                     {"a": (37, 11), "b": (11,), "c": (5, 3), "d": (1000,)})


@pytest.mark.parametrize("name,kw,clip", [OPTIMIZERS[0], OPTIMIZERS[1], OPTIMIZERS[4]])
def test_fused_optimizer_over_many_grid_rounds(name: str, kw: dict, clip: float) -> None:
    # more elements than one round of the grid covers, and an odd count (the tail)
    _check_optimizer(name, kw, clip, "float32",
                     {"a": (1025, 1031), "b": (3,), "c": (999, 7), "d": (1,)})


def _check_optimizer(name: str, kw: dict, clip: float, dtype: str,
                     shapes: dict[str, tuple[int, ...]]) -> None:
    from aicf_induct.kernels.cuda.optim import FusedUpdate
    from aicf_induct.runtime.clipping import clip_grad_norm_, global_grad_norm
    from aicf_induct.runtime.cuda_step import HYPER_FIXED, fill_hyper, segments, update_rule

    rng = np.random.default_rng()
    values = {k: rng.normal(size=s) for k, s in shapes.items()}
    ref = ParamStore.from_arrays(values, dtype=dtype)
    dev = ParamStore.from_arrays(values, dtype=dtype, xp=cp)
    o_ref, o_dev = make_optimizer(name, lr=0.01, **kw), make_optimizer(name, lr=0.01, **kw)
    o_ref.bind(ref)
    o_dev.bind(dev)
    o_ref._steps[:] = o_dev._steps[:] = [4, 4, 0, 2]  # mixed counts, as after rewrites
    update = None
    for it in range(4):
        g = rng.normal(size=ref.numel()) * (3.0 if it == 1 else 0.3)
        ref.grad[...] = g
        dev.grad.set(g.astype(dtype))
        norm = clip_grad_norm_(ref, clip) if clip else global_grad_norm(ref)
        lr = 0.01 * (1 + it)
        ratio = o_ref.step(ref, lr)
        o_dev._steps += 1
        segs = segments(o_dev, dev)
        h = np.zeros(HYPER_FIXED + 2 * len(segs))
        fill_hyper(h, o_dev, dev, segs, lr, it)
        if update is None:
            update = FusedUpdate(update_rule(o_dev), dev.data, dev.grad, dict(o_dev._flat), clip)
        update.launch(cp.asarray(h), cp.asarray(np.array(segs, dtype=np.int64)), len(segs),
                      None)
        stats = host(update.stats)
        t = 1e-5 if dtype == "float32" else 1e-12
        assert_close(dev.data, ref.data, t, f"theta step {it}")
        for slot in o_ref.slot_names:
            assert_close(o_dev._flat[slot], o_ref._flat[slot], t, f"{slot} step {it}")
        np.testing.assert_allclose(np.sqrt(stats[0]), norm, rtol=1e-5)
        np.testing.assert_allclose(np.sqrt(stats[2] / stats[1]), ratio, rtol=1e-4)
