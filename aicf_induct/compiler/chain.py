"""Recognise a training program that is a plain MLP chain, so that a whole-step kernel
(kernels/cuda/mlp_step.py) can run it in one launch.

The fused program of such a model (see `compiler.fusion`) is exactly:

    linear_act × L   (x → a_1 → … → logits; one hidden activation, none on the last)
    seed, softmax_ce (the mean cross-entropy and its gradient)
    act_linear_bwd × L, last layer first

Anything else (norms, dropout, residual adds, concat, MSE, mixed activations) is not a
chain: `match_mlp_chain` then says which instruction breaks the pattern.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aicf_induct.compiler.autodiff import Instr
from aicf_induct.ir.ops import OPS


@dataclass(frozen=True)
class ChainLayer:
    in_features: int
    out_features: int
    weight: str  # parameter names in the store
    bias: str | None


@dataclass(frozen=True)
class MlpChain:
    layers: tuple[ChainLayer, ...]
    act: str | None  # the hidden layers' activation
    act_attrs: dict[str, Any]
    label_smoothing: float
    input_id: str
    labels_id: str
    batch: int

    @property
    def params(self) -> list[str]:
        names: list[str] = []
        for layer in self.layers:
            names.append(layer.weight)
            if layer.bias is not None:
                names.append(layer.bias)
        return names

    def key(self) -> str:
        """The problem the chain is, for tuning choices: batch, widths, activation, loss."""
        dims = "-".join([str(self.layers[0].in_features)]
                        + [f"{ly.out_features}{'' if ly.bias else 'nb'}" for ly in self.layers])
        attrs = ",".join(f"{k}={v}" for k, v in sorted(self.act_attrs.items()))
        return (f"batch={self.batch};dims={dims};act={self.act}[{attrs}];"
                f"smoothing={self.label_smoothing}")


def _fused(ins: Instr, op: str) -> bool:
    return ins.kind == "fused" and ins.op == op


def match_mlp_chain(program: list[Instr], inputs: dict[str, Any]) -> MlpChain | str:
    """The chain `program` computes, or why it is not one. `inputs`: the plan's input
    buffers by node id (their shapes give the batch and the input width)."""
    n = len(program)
    depth = 0
    while depth < n and _fused(program[depth], "linear_act"):
        depth += 1
    stop = program[depth] if depth < n else None
    if stop is None or stop.kind != "seed":
        if stop is not None and stop.op in OPS and OPS[stop.op].kind == "loss":
            return f"the loss '{stop.node_id}' is {stop.op}, not softmax cross-entropy"
        what = f"{stop.kind} {stop.op} of '{stop.node_id}'" if stop else "the end"
        return f"instruction {depth} is {what}, not linear_act"
    if depth == 0 or depth + 1 >= n or not _fused(program[depth + 1], "softmax_ce"):
        return "the loss is not softmax cross-entropy after the layers"
    if n != 2 * depth + 2:
        return f"{n - depth - 2} instructions after the loss for {depth} layers"
    fwd, (seed, loss), bwd = program[:depth], program[depth:depth + 2], program[depth + 2:]
    first = fwd[0].ins[0]
    if first not in inputs or len(inputs[first].shape) != 2:
        return f"the first layer reads '{first}', not a 2-d input"
    batch, width = (int(d) for d in inputs[first].shape)
    act, act_attrs = fwd[0].attrs.get("act"), dict(fwd[0].attrs.get("act_attrs") or {})
    layers: list[ChainLayer] = []
    prev = first
    for k, ins in enumerate(fwd):
        last = k == depth - 1
        if ins.ins != [prev]:
            return f"layer '{ins.node_id}' reads {ins.ins}, not the previous layer's output"
        want = (None, {}) if last else (act, act_attrs)
        got = (ins.attrs.get("act"), dict(ins.attrs.get("act_attrs") or {}))
        if got != want:
            return (f"layer '{ins.node_id}' has activation {got[0]!r}; the chain needs "
                    f"{want[0]!r} (one hidden activation, none on the output layer)")
        out, value = int(ins.attrs["out_features"]), ins.outs[0]
        if value is None:
            return f"layer '{ins.node_id}' keeps no output"
        layers.append(ChainLayer(width, out, ins.params["weight"], ins.params.get("bias")))
        prev, width = value, out
    if loss.ins[0] != prev or seed.outs[0] != loss.ins[2]:
        return f"the loss '{loss.node_id}' does not read the last layer's output"
    for k, ins in enumerate(bwd):
        f = fwd[depth - 1 - k]
        if not _fused(ins, "act_linear_bwd") or ins.params != f.params:
            return (f"instruction {depth + 2 + k} is {ins.kind} {ins.op} of "
                    f"'{ins.node_id}', not the backward of '{f.node_id}'")
    return MlpChain(tuple(layers), act, act_attrs, float(loss.attrs.get("label_smoothing", 0.0)),
                    first, loss.ins[1], batch)
