"""The closed op table. Importing this package registers every op.

| group        | ops                                             |
|--------------|-------------------------------------------------|
| input        | input                                           |
| layer        | linear, conv2d, embedding, numeric_tokenizer    |
| attention    | attention (multi-head self-attention)           |
| pool         | pool (max / avg)                                |
| shape        | reshape, transpose                              |
| reduce       | mean, sum                                       |
| activation   | relu, gelu, tanh, silu, sigmoid, softmax        |
| norm         | layernorm, batchnorm                            |
| regularizer  | dropout                                         |
| merge        | add, concat, matmul                             |
| loss         | cross_entropy, mse                              |
"""

from aicf_induct.ir.ops import (  # noqa: F401
    activations,
    attention,
    conv,
    embedding,
    linear,
    losses,
    matmul,
    norm,
    shape,
    structural,
)
from aicf_induct.ir.ops.activations import (
    ACTIVATION_NAMES,
    ACTIVATION_TABLE,
    ACTIVATIONS,
    CUDA_NONE,
    Activation,
    activation,
)
from aicf_induct.ir.ops.base import (
    OPS,
    Array,
    OpContext,
    OpDef,
    ParamInfo,
    get_op,
)

__all__ = [
    "ACTIVATIONS",
    "ACTIVATION_NAMES",
    "ACTIVATION_TABLE",
    "CUDA_NONE",
    "OPS",
    "Activation",
    "Array",
    "OpContext",
    "OpDef",
    "ParamInfo",
    "activation",
    "get_op",
]
