"""Image ops on NCHW tensors: `conv2d` (stride, padding, bias) and `pool` (max or avg).

Both walk the kernel's kh*kw positions, each a strided slice of the padded input (written once
over `xp`); conv2d gathers them into columns (im2col) so that it is one GEMM each way.
Output size per axis: (size + 2 * padding - kernel) // stride + 1, as PyTorch (floor mode).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from aicf_induct.ir.graph import TensorType
from aicf_induct.ir.ops.base import (
    Array,
    Attrs,
    Grads,
    OpContext,
    OpDef,
    ParamInfo,
    boolean,
    hw,
    integer,
    is_int,
    one_of,
    register,
    require,
    require_float,
)


def pair(attrs: Attrs, key: str, op: str, minimum: int) -> tuple[int, int]:
    """An int-pair attr ([h, w]); a failing value is named with the op."""
    v = attrs.get(key)
    ok = (isinstance(v, list | tuple) and len(v) == 2
          and all(isinstance(a, int) and not isinstance(a, bool) and a >= minimum for a in v))
    require(ok, f"{op} attr '{key}' must be [h, w] with ints >= {minimum}, got {v!r}")
    assert isinstance(v, list | tuple)
    return int(v[0]), int(v[1])


def _image_out(t: TensorType, attrs: Attrs, op: str) -> tuple[int, int, int]:
    """(channels, out height, out width) of a conv/pool window over t (N, C, H, W)."""
    require_float(t)
    require(len(t.shape) == 4 and all(d is not None for d in t.shape[1:]),
            f"{op} expects (batch, channels, height, width), got {t}")
    (kh, kw), (sh, sw) = pair(attrs, "kernel_size", op, 1), pair(attrs, "stride", op, 1)
    ph, pw = pair(attrs, "padding", op, 0)
    _, c, hgt, wid = (int(d or 0) for d in t.shape)
    oh, ow = (hgt + 2 * ph - kh) // sh + 1, (wid + 2 * pw - kw) // sw + 1
    require(oh >= 1 and ow >= 1, f"{op} kernel {[kh, kw]} does not fit {t} with padding "
                                 f"{[ph, pw]}")
    return c, oh, ow


def _pad(xp: object, x: Array, ph: int, pw: int, value: float = 0.0) -> Array:
    if not (ph or pw):
        return x
    return xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)),  # type: ignore[attr-defined]
                  constant_values=value)


def _window(attrs: Attrs, i: int, j: int, oh: int, ow: int) -> tuple[slice, ...]:
    """The slice of the padded input that kernel position (i, j) sees, for every output."""
    sh, sw = attrs["stride"]
    return (slice(None), slice(None), slice(i, i + sh * (oh - 1) + 1, sh),
            slice(j, j + sw * (ow - 1) + 1, sw))


# -- conv2d -----------------------------------------------------------------------------------

def _conv_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    c_out = attrs.get("out_channels")
    require(is_int(c_out) and c_out > 0,
            f"conv2d needs attr 'out_channels' > 0, got {c_out!r}")
    _, oh, ow = _image_out(ins[0], attrs, "conv2d")
    return TensorType((ins[0].shape[0], c_out, oh, ow), ins[0].dtype)


def _conv_params(ins: Sequence[TensorType], attrs: Attrs) -> dict[str, ParamInfo]:
    c_in, (kh, kw) = int(ins[0].shape[1] or 0), attrs["kernel_size"]
    bound = f"uniform:{1.0 / math.sqrt(c_in * kh * kw)!r}"  # PyTorch's nn.Conv2d default
    out = {"weight": ParamInfo((int(attrs["out_channels"]), c_in, kh, kw), bound)}
    if attrs.get("bias", True):
        out["bias"] = ParamInfo((int(attrs["out_channels"]),), bound)
    return out


def _columns(xp: object, xpad: Array, attrs: Attrs, oh: int, ow: int) -> Array:
    """im2col: (N * OH * OW, C * kh * kw), one row per output position, ordered as the
    weight's (C, kh, kw) so that the convolution is one GEMM with weight (O, C * kh * kw)."""
    kh, kw = attrs["kernel_size"]
    wins = xp.stack([xpad[_window(attrs, i, j, oh, ow)]  # type: ignore[attr-defined]
                     for i in range(kh) for j in range(kw)], axis=2)  # (N, C, kh*kw, OH, OW)
    n, c = xpad.shape[0], xpad.shape[1]
    return wins.transpose(0, 3, 4, 1, 2).reshape(n * oh * ow, c * kh * kw)


def _out_size(xpad: Array, attrs: Attrs) -> tuple[int, int]:
    (kh, kw), (sh, sw) = attrs["kernel_size"], attrs["stride"]
    return (xpad.shape[2] - kh) // sh + 1, (xpad.shape[3] - kw) // sw + 1


def _conv_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                  attrs: Attrs) -> Array:
    xp, w = ctx.xp, params["weight"]
    xpad = _pad(xp, ins[0], *attrs["padding"])
    oh, ow = _out_size(xpad, attrs)
    y = _columns(xp, xpad, attrs, oh, ow) @ w.reshape(w.shape[0], -1).T  # (N*OH*OW, O)
    if "bias" in params:
        y += params["bias"]
    return y.reshape(xpad.shape[0], oh, ow, w.shape[0]).transpose(0, 3, 1, 2)


def _conv_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                   out: Array, gout: Array, attrs: Attrs, needs: Sequence[bool]) -> Grads:
    xp, w = ctx.xp, params["weight"]
    (kh, kw), (ph, pw) = attrs["kernel_size"], attrs["padding"]
    xpad = _pad(xp, ins[0], ph, pw)
    n, c = xpad.shape[0], xpad.shape[1]
    oh, ow = gout.shape[2], gout.shape[3]
    g2 = gout.transpose(0, 2, 3, 1).reshape(n * oh * ow, w.shape[0])  # (N*OH*OW, O)
    grads = {"weight": (g2.T @ _columns(xp, xpad, attrs, oh, ow)).reshape(w.shape)}
    if "bias" in params:
        grads["bias"] = g2.sum(axis=0)
    if not needs[0]:
        return [None], grads
    gcols = (g2 @ w.reshape(w.shape[0], -1)).reshape(n, oh, ow, c, kh, kw)
    gxpad = xp.zeros_like(xpad)
    for i in range(kh):  # col2im: each kernel position adds back into its strided slice
        for j in range(kw):
            gxpad[_window(attrs, i, j, oh, ow)] += gcols[..., i, j].transpose(0, 3, 1, 2)
    return [gxpad[:, :, ph:ph + ins[0].shape[2], pw:pw + ins[0].shape[3]]], grads


register(OpDef(
    name="conv2d", kind="layer", arity=1,
    attrs={"out_channels": None, "kernel_size": None, "stride": [1, 1], "padding": [0, 0],
           "bias": True},
    checks={"out_channels": integer(), "kernel_size": hw(1), "stride": hw(1),
            "padding": hw(0), "bias": boolean},
    infer=_conv_infer, forward=_conv_forward, backward=_conv_backward, params=_conv_params,
    doc="2-D convolution of (N, C, H, W); weight (out, C, kh, kw), bias (out,)",
))


# -- pool -------------------------------------------------------------------------------------

def _pool_infer(ins: Sequence[TensorType], attrs: Attrs) -> TensorType:
    mode = attrs.get("mode")
    require(mode in ("max", "avg"), f"pool attr 'mode' must be 'max' or 'avg', got {mode!r}")
    kh, kw = pair(attrs, "kernel_size", "pool", 1)
    ph, pw = pair(attrs, "padding", "pool", 0)
    require(2 * ph <= kh and 2 * pw <= kw,
            f"pool padding {[ph, pw]} must be at most half the kernel {[kh, kw]}")
    c, oh, ow = _image_out(ins[0], attrs, "pool")
    return TensorType((ins[0].shape[0], c, oh, ow), ins[0].dtype)


def _pool_windows(ctx: OpContext, x: Array, attrs: Attrs) -> tuple[Array, Array]:
    """Every kernel position's slice, stacked: (kh*kw, N, C, OH, OW); and the padded input."""
    (kh, kw), (ph, pw) = attrs["kernel_size"], attrs["padding"]
    fill = -math.inf if attrs["mode"] == "max" else 0.0  # avg counts the padding (PyTorch)
    xpad = _pad(ctx.xp, x, ph, pw, fill)
    oh = (xpad.shape[2] - kh) // attrs["stride"][0] + 1
    ow = (xpad.shape[3] - kw) // attrs["stride"][1] + 1
    wins = [xpad[_window(attrs, i, j, oh, ow)] for i in range(kh) for j in range(kw)]
    return ctx.xp.stack(wins), xpad


def _pool_forward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                  attrs: Attrs) -> Array:
    wins, _ = _pool_windows(ctx, ins[0], attrs)
    return wins.max(axis=0) if attrs["mode"] == "max" else wins.mean(axis=0)


def _pool_backward(ctx: OpContext, ins: Sequence[Array], params: Mapping[str, Array],
                   out: Array, gout: Array, attrs: Attrs, needs: Sequence[bool]) -> Grads:
    if not needs[0]:
        return [None], {}
    xp, x = ctx.xp, ins[0]
    (kh, kw), (ph, pw) = attrs["kernel_size"], attrs["padding"]
    wins, xpad = _pool_windows(ctx, x, attrs)
    oh, ow = gout.shape[2], gout.shape[3]
    gxpad = xp.zeros_like(xpad)
    # max: the whole gradient goes to the first maximum of each window, as PyTorch's CPU kernel
    first = wins.argmax(axis=0) if attrs["mode"] == "max" else None
    for k in range(kh * kw):
        share = gout * (first == k) if first is not None else gout / (kh * kw)
        gxpad[_window(attrs, k // kw, k % kw, oh, ow)] += share
    return [gxpad[:, :, ph:ph + x.shape[2], pw:pw + x.shape[3]]], {}


register(OpDef(
    name="pool", kind="pool", arity=1,
    attrs={"mode": "max", "kernel_size": None, "stride": None, "padding": [0, 0]},
    checks={"mode": one_of("max", "avg"), "kernel_size": hw(1), "stride": hw(1),
            "padding": hw(0)},
    infer=_pool_infer, forward=_pool_forward, backward=_pool_backward,
    doc="max or avg pooling of (N, C, H, W) windows; avg divides by the kernel's area",
))
