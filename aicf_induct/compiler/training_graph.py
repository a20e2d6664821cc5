"""The training graph: a model graph with a label input and a loss node appended."""

from __future__ import annotations

from dataclasses import dataclass

from aicf_induct.errors import ConfigError
from aicf_induct.ir.builder import GraphBuilder
from aicf_induct.ir.graph import Graph
from aicf_induct.ir.validate import validate

LOSSES = ("cross_entropy", "mse")


@dataclass(frozen=True)
class TrainingGraph:
    graph: Graph  # the model's nodes, then "labels" and "loss"
    prediction: str  # id of the model output the loss reads
    labels: str
    loss: str


def with_loss(model: Graph, loss: str, label_smoothing: float = 0.0) -> TrainingGraph:
    if loss not in LOSSES:
        raise ConfigError(f"unknown loss '{loss}' (valid: {', '.join(LOSSES)})")
    types = validate(model)
    pred = model.outputs[0]
    b = GraphBuilder(model.name)
    b.graph = model.copy()
    b.types = dict(types)
    if loss == "cross_entropy":
        labels = b.input([None], "int64", id="labels")
        attrs = {"label_smoothing": float(label_smoothing)} if label_smoothing else {}
        loss_id = b.add("cross_entropy", [pred, labels], attrs, id="loss")
    else:
        shape = list(types[pred].shape)
        if shape[-1:] == [1]:  # one target per row: labels are (batch,)
            shape = shape[:-1]
        labels = b.input(shape, types[pred].dtype, id="labels")
        loss_id = b.add("mse", [pred, labels], id="loss")
    b.graph.outputs = [loss_id, *model.outputs]
    return TrainingGraph(b.graph, pred, labels, loss_id)
