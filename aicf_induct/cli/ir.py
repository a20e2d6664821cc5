"""`aicf-induct ir show|validate|import`: inspect canonical IR files; import ONNX models."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from aicf_induct.cli import options
from aicf_induct.errors import ConfigError
from aicf_induct.ir import canonical
from aicf_induct.ir.fingerprint import fingerprint
from aicf_induct.ir.graph import Graph
from aicf_induct.ir.patterns import patterns
from aicf_induct.ir.validate import validate


def softmax_output(graph: Graph) -> str | None:
    """The id of a softmax that produces the graph's output, if one does: a classifier
    trained under cross_entropy (which takes logits) would apply it twice."""
    ops = graph.node_map()
    for out in graph.outputs:
        node = ops.get(out)
        if node is not None and node.op == "softmax":
            return node.id
    return None


def softmax_note(graph: Graph, where: str) -> str | None:
    node = softmax_output(graph)
    if node is None:
        return None
    return (f"note: {where} ends in a softmax ('{node}'): cross_entropy, a classifier's loss, "
            "takes logits and applies its own, so training would apply softmax twice: drop "
            "it before training (docs/ir.md)")


def render(graph: Graph) -> str:
    """A readable listing: one line per node with its type and parameters."""
    types = validate(graph)
    lines = [f"graph {graph.name or '(unnamed)'}: {len(graph.nodes)} nodes, "
             f"{graph.param_count()} trainable parameters"]
    width = max(len(n.id) for n in graph.nodes)
    for n in graph.nodes:
        attrs = ", ".join(f"{k}={v}" for k, v in sorted(n.attrs.items()))
        params = ", ".join(f"{r}:{list(graph.params[p].shape)}" for r, p in n.params.items())
        args = ", ".join(n.inputs)
        lines.append(f"  {n.id:<{width}} = {n.op}({args}){' {' + attrs + '}' if attrs else ''}"
                     f"  -> {types[n.id]}{'  [' + params + ']' if params else ''}")
    lines.append(f"outputs: {', '.join(graph.outputs)}")
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ir", help="inspect IR files",
                       description="Inspect canonical IR files (format aicf.ir/1).")
    isub = p.add_subparsers(dest="ir_command", metavar="ACTION", required=True)
    show = isub.add_parser(
        "show", help="print a graph, its fingerprint and its patterns",
        description="Print an IR file's graph, one line per node (op, inputs, attributes, "
                    "inferred type, parameter shapes), then its structural fingerprint and "
                    "the patterns the warehouse mines (depth, widths, op counts, motifs). "
                    "An invalid file is one error line naming the first problem.",
        epilog="example: aicf-induct train --dataset iris --save-ir m.json && "
               "aicf-induct ir show m.json")
    show.add_argument("file", help="canonical IR JSON file")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(func=run_show)
    val = isub.add_parser(
        "validate", help="check a file; one line per problem",
        description="Check an IR file: JSON syntax, the document's fields, node ids, ops and "
                    "their arity and attributes, references (dangling, cycles, order), the "
                    "parameter table, and every shape rule. A valid file prints one line "
                    "with its fingerprint (exit 0); otherwise every problem is listed, one "
                    "line each, and the exit status is 2.")
    val.add_argument("file", help="canonical IR JSON file")
    val.set_defaults(func=run_validate)
    imp = isub.add_parser(
        "import", help="convert an ONNX model to canonical IR",
        description="Convert an ONNX model (e.g. from torch.onnx.export) to canonical IR, for "
                    "the ops the IR has: Gemm/MatMul+Add, activations (Relu, Tanh, Sigmoid, x*"
                    "Sigmoid as SiLU, Gelu and the erf GELU's nodes), LayerNormalization, "
                    "BatchNormalization (2-D), Softmax, Reshape/Flatten/Transpose, Concat, "
                    "Conv, MaxPool/AveragePool/GlobalAveragePool, ReduceMean/ReduceSum, "
                    "Gather (embedding), and the nodes torch exports for "
                    "nn.MultiheadAttention (a torch model imports from Python too: "
                    "aicf_induct.frontend.from_torch, docs/ir.md). A node with no IR form "
                    "is one error line naming it (op type and node name), exit 2, and "
                    "nothing is written. Needs the `onnx` package (the `onnx` extra). Export "
                    "from PyTorch with torch.onnx.export(..., dynamo=False): the default "
                    "dynamo exporter writes attention with a transpose that moves the batch "
                    "axis, and its optimize=True folds BatchNorm into the Linear before it.",
        epilog="example: aicf-induct ir import model.onnx -o model.json --values model.npz && "
               "aicf-induct ir show model.json")
    imp.add_argument("file", help="ONNX model file")
    imp.add_argument("-o", "--output", metavar="FILE", type=options.new_file,
                     help="IR file to write (default: the model's name with .json)")
    imp.add_argument("--values", metavar="FILE", type=options.new_file,
                     help="also write the parameter and buffer values (.npz, by name)")
    imp.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                     help="the IR's float type (default float64)")
    imp.set_defaults(func=run_import)


def run_show(args: argparse.Namespace) -> int:
    graph = canonical.load(args.file)
    fp, pats = fingerprint(graph), patterns(graph)
    if args.json:  # the listing's facts too: each node's op, inputs, attributes, type
        types = validate(graph)
        nodes = [{"id": n.id, "op": n.op, "inputs": list(n.inputs), "attrs": dict(n.attrs),
                  "type": str(types[n.id]),
                  "params": {r: list(graph.params[p].shape) for r, p in n.params.items()}}
                 for n in graph.nodes]
        print(json.dumps({"name": graph.name, "nodes": nodes, "outputs": list(graph.outputs),
                          "fingerprint": fp, "patterns": pats,
                          "param_count": graph.param_count()}, indent=1))
        return 0
    print(render(graph))
    print(f"fingerprint: {fp}")
    print("patterns:")
    for k, v in pats.items():
        print(f"  {k:<32} {v:g}")
    return 0


def run_validate(args: argparse.Namespace) -> int:
    found = canonical.problems_in(canonical.read_text(args.file))
    if found:  # every problem on stdout; the error line repeats the first and counts them
        for err in found:
            print(f"{args.file}: {err}")
        many = f"; {len(found)} problems, listed on standard output" if len(found) > 1 else ""
        raise type(found[0])(f"{found[0].problem} (in {args.file}{many})", found[0].node)
    graph = canonical.load(args.file)
    print(f"{args.file}: valid ({len(graph.nodes)} nodes, fingerprint {fingerprint(graph)[:16]})")
    return 0


def run_import(args: argparse.Namespace) -> int:
    try:
        from aicf_induct.frontend.onnx_import import from_onnx
    except ImportError as err:  # pragma: no cover - the onnx extra is not installed
        raise ConfigError(f"ir import needs the onnx package (pip install "
                          f"'aicf-induct[onnx]'): {err}") from None
    out = args.output or str(Path(args.file).with_suffix(".json"))
    why = None if args.output else options.unwritable(out)
    if why:  # -o was checked as it was parsed; the IR file named after the model is checked here
        raise ConfigError(f"{out}: {why} (name the IR file with -o FILE)")
    # NumPy names a values file without the extension FILE.npz: say, and check, that name
    values_path = None if not args.values else \
        args.values if args.values.endswith(".npz") else args.values + ".npz"
    graph, values = from_onnx(args.file, name=Path(args.file).stem, dtype=args.dtype)
    _distinct_outputs(args.file, out, values_path)
    if values_path:
        _save_pair(graph, Path(out), values, Path(values_path))
    else:
        canonical.save(graph, out)
    print(f"{args.file}: {len(graph.nodes)} nodes, {graph.param_count()} trainable "
          f"parameters, fingerprint {fingerprint(graph)[:16]}; IR written to {out}"
          + (f", values to {values_path}" if values_path else ""))
    note = softmax_note(graph, args.file)
    if note:
        print(note, file=sys.stderr)
    return 0


def _distinct_outputs(model: str, out: str, values: str | None) -> None:
    """The IR file, the values file and the model are three files: `-o model.onnx` replaced
    the user's model with the IR, and `-o X --values X` kept only the values."""
    def same(a: str, b: str) -> bool:
        return Path(a).resolve() == Path(b).resolve()

    if same(out, model):
        raise ConfigError(f"-o {out} is the ONNX model being imported: name another file")
    if values is not None and same(values, model):
        raise ConfigError(f"--values {values} is the ONNX model being imported: name another "
                          "file")
    if values is not None and same(values, out):
        raise ConfigError(f"--values {values} and the IR file {out} are one file: name two")


def _save_pair(graph: Graph, out: Path, values: dict[str, Any], values_path: Path) -> None:
    """The IR file and its values file, replaced together (`atomic_write_all`): a failure or
    an interrupt leaves both as they were, not new values beside an old IR, which `train
    --ir --values` then refuses (a device or a pipe among them written in place)."""
    import numpy as np

    from aicf_induct.atomic_file import atomic_write_all

    def failed(path: Path, err: OSError) -> ConfigError:
        option = "--values" if path == values_path else "-o"
        return ConfigError(f"{option} {path}: cannot write it ({err.strerror or err})")

    def write_ir(tmp: Path) -> None:
        try:
            tmp.write_text(canonical.file_text(graph), encoding="utf-8")
        except OSError as err:
            raise failed(out, err) from None

    def write_values(tmp: Path) -> None:
        try:
            with open(tmp, "wb") as f:  # open(): the file gets the umask's mode, as any would
                np.savez(f, **values)
        except OSError as err:
            raise failed(values_path, err) from None

    canonical.check_save_path(str(out))
    try:
        atomic_write_all([(values_path, write_values), (out, write_ir)])
    except OSError as err:  # a rename's, which names the final file second
        raise failed(values_path if err.filename2 == str(values_path) else out, err) from None
