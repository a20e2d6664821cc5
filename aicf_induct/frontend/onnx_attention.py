"""One IR `attention` node for the many ONNX nodes an exported `nn.MultiheadAttention` becomes.

torch's exporter writes self-attention as some sixty nodes (projections, shape arithmetic,
head splits, a Softmax, two batched MatMuls, the output projection) whose names share the
module's scope (`/blocks/0/attn/...`). A *region* is such a scope: it holds a Softmax and a
MatMul of two computed tensors, reads one computed tensor (x, (N, T, d)) and yields one.
Its constants must be a packed q/k/v projection ((d, 3d) or (3d, d), with a (3d,) bias) and
an output projection ((d, d), with a (d,) bias). Which way the output projection is stored
and how many heads there are is not written anywhere a converter could read reliably, so
each choice is tried: the region is run by ONNX's reference evaluator on a random input and
the first IR attention that gives the same output is taken; none, and the import fails
naming the region.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from aicf_induct.frontend import functional as F
from aicf_induct.frontend.onnx_importer import Importer, Unsupported
from aicf_induct.ir.ops import OPS, OpContext

# suffixes a torch export's parameter names carry under the attention module's path
SUFFIXES = (".in_proj_weight", ".in_proj_bias", ".out_proj.weight", ".out_proj.bias")


@dataclass(frozen=True)
class Region:
    scope: str
    members: tuple[int, ...]
    input: str
    output: str
    constants: tuple[str, ...]  # what it reads that is neither x nor made inside it


def find_regions(imp: Importer) -> dict[int, Region]:
    """Attention regions by the index of their first node that is not a folded constant
    (see the module docstring). Call after the constants are folded."""
    regions: dict[int, Region] = {}
    seen: set[str] = set()
    for node in imp.nodes:
        scope = node.name.rpartition("/")[0]
        if node.op_type != "Softmax" or not scope.strip("/") or scope in seen:
            continue
        seen.add(scope)
        members = tuple(i for i, n in enumerate(imp.nodes) if n.name.startswith(scope + "/"))
        inside = set(members)
        made = {o for i in members for o in imp.nodes[i].output if o}
        reads = dict.fromkeys(n for i in members for n in imp.nodes[i].input
                              if n and n not in made)
        computed = [n for n in reads if not isinstance(imp.env.get(n), np.ndarray)]
        outs = [o for o in made if not isinstance(imp.env.get(o), np.ndarray) and (
            o in imp.graph_outputs or any(c not in inside for c in imp.consumers.get(o, [])))]
        qk = any(imp.nodes[i].op_type == "MatMul" and not any(
            isinstance(imp.env.get(n), np.ndarray) for n in imp.nodes[i].input) for i in members)
        if len(computed) == 1 and len(outs) == 1 and qk:
            consts = tuple(n for n in reads if n not in computed)
            first = min(i for i in members if i not in imp.done)  # not folded: x is ready
            regions[first] = Region(scope, members, computed[0], outs[0], consts)
    return regions


def _classify(imp: Importer, region: Region, d: int) -> dict[str, tuple[str, np.ndarray]]:
    """The projection constants by role (name, value); Unsupported if they do not fit."""
    found: dict[str, tuple[str, np.ndarray]] = {}
    for name in region.constants:
        v = imp.env[name]
        assert isinstance(v, np.ndarray)
        if not np.issubdtype(v.dtype, np.floating) or v.size <= 1:
            continue  # shape arithmetic and the 1/sqrt(d) scale
        role = {(3 * d, d): "in_weight", (d, 3 * d): "in_weight_t", (3 * d,): "in_bias",
                (d, d): "out_weight", (d,): "out_bias"}.get(v.shape)
        if role is None or role.removesuffix("_t") in {r.removesuffix("_t") for r in found}:
            raise Unsupported(f"attention-like nodes under '{region.scope}' read a constant "
                              f"'{name}' of shape {list(v.shape)} that is no packed q/k/v or "
                              "output projection")
        found[role] = (name, v)
    if "in_weight_t" in found:
        name, v = found.pop("in_weight_t")
        found["in_weight"] = (name, v.T)
    if "in_weight" not in found or "out_weight" not in found or \
            ("in_bias" in found) != ("out_bias" in found):
        raise Unsupported(f"attention-like nodes under '{region.scope}' lack a packed q/k/v "
                          "projection, an output projection, or one of the two biases")
    return found


def _reference(imp: Importer, region: Region, x: np.ndarray) -> np.ndarray:
    """The region's output for input x, by ONNX's reference evaluator."""
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    inits = [numpy_helper.from_array(np.asarray(imp.env[n]), n) for n in region.constants]
    graph = helper.make_graph(
        [imp.nodes[i] for i in region.members], "attention",
        [helper.make_tensor_value_info(region.input, helper.np_dtype_to_tensor_dtype(x.dtype),
                                       x.shape)],
        [helper.make_empty_tensor_value_info(region.output)], inits)
    model = helper.make_model(graph, opset_imports=list(imp.model.opset_import))
    model.ir_version = imp.model.ir_version
    outs: Any = ReferenceEvaluator(model).run(None, {region.input: x})
    return np.asarray(outs[0], dtype=np.float64)


def _match(imp: Importer, region: Region, found: dict[str, tuple[str, np.ndarray]],
           t: int, d: int) -> tuple[int, np.ndarray]:
    """The heads and output weight (as the IR stores it) that reproduce the region."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((imp.batch or 2, t, d))  # a fixed batch size is folded in
    try:
        ref = _reference(imp, region, x.astype(_onnx_float(imp)))
    except Exception as err:  # whatever the evaluator's op implementations raise
        raise Unsupported(f"ONNX's reference evaluator cannot run the nodes under "
                          f"'{region.scope}' ({type(err).__name__}: {err})") from None
    params = {role: np.asarray(v, dtype=np.float64) for role, (_, v) in found.items()}
    out_w = params["out_weight"]
    tol = 1e-4 * max(1.0, float(np.abs(ref).max()))
    for heads in (h for h in range(1, d + 1) if d % h == 0):
        for w in (out_w, out_w.T):
            attrs = {"heads": heads, "dropout": 0.0, "bias": "in_bias" in params}
            y = OPS["attention"].forward(OpContext(training=False), [x],
                                         {**params, "out_weight": w}, attrs)
            if np.allclose(y, ref, rtol=1e-4, atol=tol):
                return heads, w
    raise Unsupported(f"attention-like nodes under '{region.scope}' compute no multi-head "
                      f"self-attention with these projections (tried every head count of "
                      f"d={d} and both layouts of the output projection)")


def _onnx_float(imp: Importer) -> Any:
    from onnx import TensorProto

    elem = next(i.type.tensor_type.elem_type for i in imp.model.graph.input)
    return np.float64 if elem == TensorProto.DOUBLE else np.float32


def emit(imp: Importer, region: Region) -> None:
    x = imp.tensor(region.input, "the attention's input")
    if x.ndim != 3 or x.shape[1] is None or x.shape[2] is None:
        raise Unsupported(f"attention-like nodes under '{region.scope}' need an input of "
                          f"shape (N, T, d), got rank {x.ndim}")
    t, d = int(x.shape[1]), int(x.shape[2])
    found = _classify(imp, region, d)
    heads, out_w = _match(imp, region, found, t, d)
    path = next((n[: -len(s)] for n, _ in found.values() for s in SUFFIXES if n.endswith(s)),
                None)
    names = {role: (f"{path}{s}" if path else None) for role, s in zip(
        ("in_weight", "in_bias", "out_weight", "out_bias"), SUFFIXES, strict=True)}
    bias = "in_bias" in found
    with imp.named(path):
        y = F.self_attention(
            x, heads, imp.param(found["in_weight"][1], names["in_weight"],
                                source=found["in_weight"][0]),
            imp.param(found["in_bias"][1], names["in_bias"], source=found["in_bias"][0])
            if bias else None,
            imp.param(out_w, names["out_weight"], source=found["out_weight"][0]),
            imp.param(found["out_bias"][1], names["out_bias"], source=found["out_bias"][0])
            if bias else None, 0.0)
    imp.env[region.output] = y
    imp.done.update(region.members)
