"""The compiler's whole pipeline up to, not including, execution: a training graph in, a
straight program of instructions out, with every value typed at one batch size and placed in
one arena by the liveness-based memory plan.

Binding the program to kernels, buffers and parameters (the executable plan) is runtime
code: see `aicf_induct.runtime.plan`.
"""

from __future__ import annotations

from dataclasses import dataclass

from aicf_induct.compiler.autodiff import Instr, backward_program, forward_program, grad_of
from aicf_induct.compiler.fusion import check_program, fuse_program
from aicf_induct.compiler.memory import MemoryPlan, ValueInfo, lifetimes, plan_memory
from aicf_induct.ir.graph import Graph
from aicf_induct.ir.validate import infer_types


@dataclass(frozen=True)
class CompiledProgram:
    """What the passes produce for one batch size."""

    program: list[Instr]  # forward, then backward when training, after fusion and DCE
    feeds: list[str]  # input node ids the program reads
    infos: dict[str, ValueInfo]  # every value's shape and dtype
    memory: MemoryPlan  # arena offsets of the values that live across instructions


def compile_program(graph: Graph, batch: int, *, training: bool, loss: str | None,
                    roots: list[str], fuse: bool = False,
                    precision: str = "fp32") -> CompiledProgram:
    """Run the passes: autodiff (when `training` and `loss`), fusion (when `fuse`, its GEMMs in
    `precision`), shape inference at `batch`, liveness and the memory plan. `roots` are the
    values a caller reads after a run (predictions, the loss)."""
    program = forward_program(graph, roots)
    if training and loss is not None:
        program += backward_program(graph, loss)
    feeds = [n.id for n in graph.nodes if n.op == "input"
             and any(n.id in ins.ins for ins in program)]
    if fuse:
        program, _ = fuse_program(program, graph, keep=roots, precision=precision)
        check_program(program, feeds)
    infos = _value_infos(graph, batch, program)
    life = lifetimes([(i.ins, i.outs) for i in program], feeds, roots)
    memory = plan_memory({v: infos[v] for v in life}, life)
    return CompiledProgram(program, feeds, infos, memory)


def _value_infos(graph: Graph, batch: int, program: list[Instr]) -> dict[str, ValueInfo]:
    types = infer_types(graph, batch=batch, check_params=False)
    infos = {nid: ValueInfo(tuple(int(d) for d in t.shape if d is not None), t.dtype)
             for nid, t in types.items()}
    for ins in program:
        for v in ins.outs:
            if v is not None and (base := grad_of(v)) is not None:
                infos[v] = ValueInfo(infos[base].shape, infos[base].dtype)
    return infos
