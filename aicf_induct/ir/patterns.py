"""Structural patterns: the graph features the induction layer mines against problems.

All values are floats so they fit one `(fingerprint, pattern, value)` table. Names:

- `nodes`, `op.<op>`: node counts (inputs excluded).
- `depth`: linear layers on the longest input→output path; `hidden_layers` = depth - 1.
- `width.{min,max,mean,first,last,ratio}` over hidden linear widths (the output head
  excluded); profile flags `width.{constant,funnel,expand,bottleneck}` (0/1).
- `params.count` (trainable scalars), `params.log10`.
- `act.<kind>` counts (by the model spec's name: `act.gelu_tanh` is gelu with
  approximate=tanh), `act.kinds` (distinct kinds); `norm.<kind>` counts;
  `norm.placement.{pre_act,post_act}` (a norm feeding an activation / fed by one).
- `residual.count` (add nodes), `concat.count`.
- `dropout.{count,rate_max,rate_mean}`.
- `motif.<a>><b>` and `motif.<a>><b>><c>`: op n-grams along paths, counted.

Beyond MLPs, only for graphs that have them (so an MLP's patterns are exactly what they were,
and the meta-dataset reads a missing pattern as 0):

- `attention.{blocks,heads,head_dim,dropout}`: attention node count; the most heads, the
  widest head (d / heads) and the highest attention dropout among them.
- `token.width`: the widest token (embedding_dim, d_token, or an attention node's d);
  `token.embeddings` (embedding + numeric_tokenizer nodes).
- `conv.{stages,channels_max,kernel_max,stride_max}`: conv2d node count, the most output
  channels, the largest kernel side and stride; `pool.{max,avg}`: pooling nodes by mode.
- `resblock.{count,d_hidden}`: residual blocks whose branch (a chain of one-input nodes from
  the skip's source to the add) holds two or more linear layers, as resmlp's blocks and an
  FT-Transformer's feed-forward sublayers do; the widest inner width among them.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

from aicf_induct.ir.graph import Graph, Node
from aicf_induct.ir.ops import ACTIVATIONS, OPS, activation


def _depths(graph: Graph) -> int:
    """Most linear layers on one path from an input to an output."""
    best: dict[str, int] = {}
    for n in graph.nodes:
        here = 1 if n.op == "linear" else 0
        best[n.id] = here + max((best[i] for i in n.inputs), default=0)
    return max(best[o] for o in graph.outputs)


def _hidden_widths(graph: Graph) -> list[int]:
    """out_features of linear layers in graph order, the output heads dropped."""
    outs = set(graph.outputs)
    consumers = graph.consumers()

    def feeds_output_directly(nid: str) -> bool:
        return nid in outs or any(c.op in ("softmax",) and c.id in outs for c in consumers[nid])

    return [int(n.attrs["out_features"]) for n in graph.nodes
            if n.op == "linear" and not feeds_output_directly(n.id)]


def _width_features(widths: list[int]) -> dict[str, float]:
    if not widths:
        return {"width.min": 0.0, "width.max": 0.0, "width.mean": 0.0, "width.first": 0.0,
                "width.last": 0.0, "width.ratio": 1.0, "width.constant": 1.0,
                "width.funnel": 0.0, "width.expand": 0.0, "width.bottleneck": 0.0}
    lo, hi = min(widths), max(widths)
    pairs = list(itertools.pairwise(widths))
    inner_min = min(widths[1:-1]) if len(widths) > 2 else hi
    return {
        "width.min": float(lo), "width.max": float(hi),
        "width.mean": sum(widths) / len(widths),
        "width.first": float(widths[0]), "width.last": float(widths[-1]),
        "width.ratio": hi / lo,
        "width.constant": float(lo == hi),
        "width.funnel": float(lo != hi and all(a >= b for a, b in pairs)),
        "width.expand": float(lo != hi and all(a <= b for a, b in pairs)),
        "width.bottleneck": float(inner_min < widths[0] and inner_min < widths[-1]),
    }


def _family_features(graph: Graph) -> dict[str, float]:
    """Attention, token and convolution patterns; empty for a graph without those ops."""
    out: dict[str, float] = {}
    attn = [OPS["attention"].full_attrs(n.attrs) | {"d": _token_width(graph, n.id)}
            for n in graph.nodes if n.op == "attention"]
    if attn:
        out["attention.blocks"] = float(len(attn))
        out["attention.heads"] = float(max(a["heads"] for a in attn))
        out["attention.head_dim"] = float(max(a["d"] // a["heads"] for a in attn))
        out["attention.dropout"] = float(max(a["dropout"] for a in attn))
    embeds = [n for n in graph.nodes if n.op in ("embedding", "numeric_tokenizer")]
    widths = [int(n.attrs.get("embedding_dim", n.attrs.get("d_token", 0))) for n in embeds]
    widths += [int(a["d"]) for a in attn]
    if widths:
        out["token.width"] = float(max(widths))
        out["token.embeddings"] = float(len(embeds))
    convs = [OPS["conv2d"].full_attrs(n.attrs) for n in graph.nodes if n.op == "conv2d"]
    if convs:
        out["conv.stages"] = float(len(convs))
        out["conv.channels_max"] = float(max(c["out_channels"] for c in convs))
        out["conv.kernel_max"] = float(max(max(c["kernel_size"]) for c in convs))
        out["conv.stride_max"] = float(max(max(c["stride"]) for c in convs))
    pools = Counter(OPS["pool"].full_attrs(n.attrs)["mode"] for n in graph.nodes
                    if n.op == "pool")
    out.update({f"pool.{mode}": float(k) for mode, k in sorted(pools.items())})
    by_id = graph.node_map()  # once: an add's walk is short, the map is not
    inner = [w for w in (_res_block(by_id, n) for n in graph.nodes if n.op == "add")
             if w is not None]
    if inner:
        out["resblock.count"] = float(len(inner))
        out["resblock.d_hidden"] = float(max(inner))
    return out


def _res_block(by_id: dict[str, Node], add: Node) -> int | None:
    """The widest inner width of the residual block an add node closes, or None if it closes
    none (its branch must be a chain of one-input nodes back to the skip's source, holding two
    or more linear layers). `by_id`: the graph's nodes by id."""
    ins = add.inputs
    for skip, branch in ((ins[0], ins[1]), (ins[1], ins[0])):
        widths: list[int] = []
        node = by_id[branch]
        while node.id != skip and len(node.inputs) == 1:
            if node.op == "linear":
                widths.append(int(node.attrs["out_features"]))
            node = by_id[node.inputs[0]]
        if node.id == skip and len(widths) >= 2:
            return max(widths[1:])  # widths[0]: the branch's last linear, back to the width
    return None


def _token_width(graph: Graph, node_id: str) -> int:
    """An attention node's d: its in_weight is (3d, d)."""
    pname = graph.node(node_id).params["in_weight"]
    return int(graph.params[pname].shape[1])


def patterns(graph: Graph) -> dict[str, float]:
    nodes = [n for n in graph.nodes if n.op != "input"]
    by_id = graph.node_map()
    consumers = graph.consumers()
    ops = Counter(n.op for n in nodes)
    out: dict[str, float] = {"nodes": float(len(nodes))}
    out.update({f"op.{k}": float(v) for k, v in sorted(ops.items())})
    depth = _depths(graph)
    out["depth"] = float(depth)
    out["hidden_layers"] = float(max(depth - 1, 0))
    out.update(_width_features(_hidden_widths(graph)))
    pc = graph.param_count()
    out["params.count"] = float(pc)
    out["params.log10"] = math.log10(pc) if pc > 0 else 0.0

    # by the model spec's name: gelu with approximate=tanh is act.gelu_tanh, not act.gelu
    acts = [_act_name(n) for n in nodes if OPS[n.op].kind == "activation"]
    for k, v in Counter(acts).items():
        out[f"act.{k}"] = float(v)
    out["act.kinds"] = float(len(set(acts)))
    norms = [n for n in nodes if OPS[n.op].kind == "norm"]
    for k, v in Counter(n.op for n in norms).items():
        out[f"norm.{k}"] = float(v)
    out["norm.count"] = float(len(norms))
    out["norm.placement.pre_act"] = float(sum(
        any(OPS[c.op].kind == "activation" for c in consumers[n.id]) for n in norms))
    out["norm.placement.post_act"] = float(sum(
        any(OPS[by_id[i].op].kind == "activation" for i in n.inputs) for n in norms))
    out["residual.count"] = float(ops.get("add", 0))
    out["concat.count"] = float(ops.get("concat", 0))

    rates = [float(n.attrs.get("p", OPS["dropout"].attrs["p"])) for n in nodes
             if n.op == "dropout"]
    out["dropout.count"] = float(len(rates))
    out["dropout.rate_max"] = max(rates, default=0.0)
    out["dropout.rate_mean"] = sum(rates) / len(rates) if rates else 0.0

    motifs: Counter[str] = Counter()
    for n in nodes:
        for i in n.inputs:
            u = by_id[i]
            if u.op == "input":
                continue
            motifs[f"motif.{u.op}>{n.op}"] += 1
            for j in u.inputs:
                w = by_id[j]
                if w.op != "input":
                    motifs[f"motif.{w.op}>{u.op}>{n.op}"] += 1
    out.update({k: float(v) for k, v in sorted(motifs.items())})
    out.update(_family_features(graph))
    return out


def _act_name(node: Node) -> str:
    """An activation node's name in the model spec (gelu with approximate=tanh: gelu_tanh);
    an activation op the spec does not name (softmax) by its op."""
    return activation(node.op, node.attrs).name if node.op in ACTIVATIONS else node.op
