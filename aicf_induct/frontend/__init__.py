"""The frontend: a PyTorch-like Module API traced to the IR, model spec strings (`mlp`, and
the `ftt`, `resmlp`, `cnn` families), import of torch models through torch.fx (`from_torch`;
torch is optional and imported only there) and of ONNX models (`from_onnx`; the `onnx`
package likewise)."""

from aicf_induct.frontend import functional
from aicf_induct.frontend.layers import (
    AvgPool2d,
    Conv2d,
    Embedding,
    Flatten,
    MaxPool2d,
    MultiheadAttention,
    NumericTokenizer,
)
from aicf_induct.frontend.module import (
    GELU,
    BatchNorm1d,
    Concat,
    Dropout,
    Identity,
    LayerNorm,
    Linear,
    Module,
    ReLU,
    Residual,
    Sequential,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
)
from aicf_induct.frontend.onnx_import import from_onnx
from aicf_induct.frontend.parameter import Buffer, Parameter
from aicf_induct.frontend.specs import MLP, MLPSpec, build_mlp, mlp_graph, parse_model_spec
from aicf_induct.frontend.tensor import SymbolicTensor, Tracer
from aicf_induct.frontend.torch_import import from_torch
from aicf_induct.frontend.trace import trace, trace_with_values

__all__ = [
    "GELU", "MLP", "AvgPool2d", "BatchNorm1d", "Buffer", "Concat", "Conv2d", "Dropout", "Embedding",
    "Flatten", "Identity", "LayerNorm", "Linear", "MLPSpec", "MaxPool2d", "Module",
    "MultiheadAttention", "NumericTokenizer", "Parameter", "ReLU", "Residual", "Sequential", "SiLU",
    "Sigmoid", "Softmax", "SymbolicTensor", "Tanh", "Tracer", "build_mlp", "from_onnx",
    "from_torch", "functional", "mlp_graph", "parse_model_spec", "trace", "trace_with_values",
]
