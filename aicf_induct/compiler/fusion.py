"""Fusion: rewrite a training program (forward + backward instructions) into fused
instructions whose kernels the registry picks (`kernels.fused` defines them).

Three patterns, each on the instruction list that autodiff produced:

1. **linear + activation.** `fwd linear L` whose only forward reader is `fwd act A`
   becomes one `linear_act` (a = act(x Wᵀ + b)). L's value (the pre-activation) is kept
   only where something still needs it: the backward of gelu/silu (their derivative is a
   function of the input), or an activation backward left unfused.
2. **activation backward + linear backward.** `vjp A` followed by `vjp L` becomes one
   `act_linear_bwd`: gz = act'(h)·g, the weight and bias gradients, and gx. Every other
   linear becomes `linear_act`/`act_linear_bwd` with no activation, so all GEMMs go
   through the fused kernels (and their precision policy). Only linears over (batch,
   features) are fused; one over tokens (batch, tokens, d) keeps its unfused kernels.
3. **softmax + cross-entropy.** The loss's forward and backward become one `softmax_ce`
   at the backward's place: one pass over the logits gives the loss and its gradient.

The pass returns `(program, modified)`; `check_program` verifies that every value is
written before it is read, so a bad rewrite fails here, naming the node, not in a kernel.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from aicf_induct.compiler.autodiff import Instr, grad_name
from aicf_induct.errors import AicfError
from aicf_induct.ir.graph import Graph
from aicf_induct.ir.ops import ACTIVATIONS, OPS, activation
from aicf_induct.ir.validate import infer_types

PRECISIONS = ("fp32", "tf32", "bf16")  # GEMM compute; storage, reductions stay fp32/fp64


class FusionError(AicfError):
    """The fusion pass produced a program that reads a value nobody wrote."""


def _readers(program: Sequence[Instr]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for k, ins in enumerate(program):
        for v in ins.ins:
            out.setdefault(v, []).append(k)
    return out


def _linear_attrs(graph: Graph, node_id: str, precision: str) -> dict[str, object]:
    node = graph.node_map()[node_id]
    full = OPS["linear"].full_attrs(node.attrs)
    return {"out_features": int(full["out_features"]), "bias": bool(full["bias"]),
            "precision": precision}


def fuse_program(program: Sequence[Instr], graph: Graph, *, keep: Iterable[str] = (),
                 precision: str = "fp32") -> tuple[list[Instr], bool]:
    """The fused program and whether anything changed. `keep`: values read after the run
    (roots); they are always materialised."""
    if precision not in PRECISIONS:
        raise AicfError(f"unknown precision {precision!r} (valid: {', '.join(PRECISIONS)})")
    prog = list(program)
    keep = set(keep)
    readers = _readers(prog)
    fwd_at = {ins.node_id: k for k, ins in enumerate(prog) if ins.kind == "fwd"}
    vjp_at = {ins.node_id: k for k, ins in enumerate(prog) if ins.kind == "vjp"}
    new: dict[int, Instr | None] = {}  # index -> replacement (None: dropped)

    types = infer_types(graph, check_params=False)
    for k, ins in enumerate(prog):
        if ins.kind != "fwd" or ins.op != "linear":
            continue
        if len(types[ins.ins[0]].shape) != 2:  # the fused kernels are (batch, features) GEMMs;
            continue  # a linear over tokens (N, T, d) keeps its plain kernels
        _fuse_linear(prog, k, graph, readers, fwd_at, vjp_at, keep, precision, new)
    for k, ins in enumerate(prog):
        if ins.kind == "fwd" and ins.op == "cross_entropy" and ins.node_id in vjp_at:
            _fuse_cross_entropy(prog, k, vjp_at[ins.node_id], readers, new)

    out = [new.get(k, ins) for k, ins in enumerate(prog)]
    fused = [ins for ins in out if ins is not None]
    return fused, bool(new)


def _fuse_linear(prog: list[Instr], k: int, graph: Graph, readers: dict[str, list[int]],
                 fwd_at: dict[str, int], vjp_at: dict[str, int], keep: set[str],
                 precision: str, new: dict[int, Instr | None]) -> None:
    lin = prog[k]
    lid = lin.node_id
    attrs = _linear_attrs(graph, lid, precision)
    act_k = _fusable_activation(prog, lid, readers, keep)
    vjp_l = vjp_at.get(lid)
    if act_k is None:  # a linear alone: still one fused instruction, no activation
        new[k] = Instr("fused", "linear_act", lid, list(lin.ins), [lid, None],
                       {**attrs, "act": None, "act_attrs": {}}, dict(lin.params))
        if vjp_l is not None:
            v = prog[vjp_l]
            new[vjp_l] = Instr("fused", "act_linear_bwd", lid, [v.ins[0], v.ins[-1]],
                               [v.outs[0], None], {**attrs, "act": None, "act_attrs": {}},
                               dict(v.params), v.needs)
        return
    act = prog[act_k]
    aid = act.node_id
    act_attrs = OPS[act.op].full_attrs(act.attrs)
    vjp_a = vjp_at.get(aid)
    from_output = activation(act.op, act_attrs).from_output
    fuse_bwd = (vjp_a is not None and vjp_l is not None
                and prog[vjp_a].outs[0] == prog[vjp_l].ins[-1])
    need_z = vjp_a is not None and (not fuse_bwd or not from_output)
    fa = {**attrs, "act": act.op, "act_attrs": act_attrs}
    new[k] = Instr("fused", "linear_act", f"{lid}+{aid}", list(lin.ins),
                   [aid, lid if need_z else None], fa, dict(lin.params))
    new[act_k] = None
    if fuse_bwd:
        assert vjp_a is not None and vjp_l is not None
        va, vl = prog[vjp_a], prog[vjp_l]
        h = aid if from_output else lid
        new[vjp_a] = Instr("fused", "act_linear_bwd", f"{lid}+{aid}",
                           [vl.ins[0], va.ins[-1], h], [vl.outs[0], grad_name(lid)], fa,
                           dict(vl.params), vl.needs)
        new[vjp_l] = None
    elif vjp_l is not None:
        v = prog[vjp_l]
        new[vjp_l] = Instr("fused", "act_linear_bwd", lid, [v.ins[0], v.ins[-1]],
                           [v.outs[0], None], {**attrs, "act": None, "act_attrs": {}},
                           dict(v.params), v.needs)


def _fusable_activation(prog: list[Instr], lid: str, readers: dict[str, list[int]],
                        keep: set[str]) -> int | None:
    """Index of the activation fwd that is the linear's only consumer, else None."""
    if lid in keep:
        return None
    fwd_readers = [j for j in readers.get(lid, []) if prog[j].kind == "fwd"]
    if len(fwd_readers) != 1 or prog[fwd_readers[0]].op not in ACTIVATIONS:
        return None
    aid = prog[fwd_readers[0]].node_id
    for j in readers.get(lid, []):  # besides the act: only the two backward rules
        if j != fwd_readers[0] and not (prog[j].kind == "vjp"
                                         and prog[j].node_id in (lid, aid)):
            return None
    return fwd_readers[0]


def _fuse_cross_entropy(prog: list[Instr], k: int, vk: int, readers: dict[str, list[int]],
                        new: dict[int, Instr | None]) -> None:
    fwd, vjp = prog[k], prog[vk]
    loss = fwd.node_id
    if vjp.outs[0] is None or any(j != vk for j in readers.get(loss, [])):
        return
    logits, labels = fwd.ins
    eps = float(OPS["cross_entropy"].full_attrs(fwd.attrs)["label_smoothing"])
    new[k] = None
    new[vk] = Instr("fused", "softmax_ce", loss, [logits, labels, vjp.ins[-1]],
                    [loss, vjp.outs[0]], {"label_smoothing": eps})


def check_program(program: Sequence[Instr], feeds: Iterable[str]) -> None:
    """Every value is written before it is read; raises FusionError naming the node."""
    written = set(feeds)
    for ins in program:
        for v in ins.ins:
            if v not in written:
                raise FusionError(f"{ins.kind} {ins.op} of node '{ins.node_id}' reads "
                                  f"'{v}', which no earlier instruction writes")
        written.update(v for v in ins.outs if v is not None)
