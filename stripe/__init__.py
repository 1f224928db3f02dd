"""stripe: tensor operations compiled through the Stripe nested polyhedral IR.

Public API::

    blk  = stripe.lower(source, inputs)     # Tile source -> the #program Block
    outs = stripe.interpret(blk, arrays)    # reference interpreter -> {output: ndarray}
    text = stripe.print_ir(blk); stripe.parse_ir(text) == blk
    stripe.verify(blk)                      # raises VerifyError naming the block path
    prog = stripe.compile(source, inputs)   # C through cffi; prog(**arrays) -> {output: ndarray}
    prog = stripe.compile(source, inputs, target="cpu_avx2")  # a config's passes and Target
    x = stripe.arrays.empty((m, n))         # 64-byte aligned arrays for inputs and out=

Every error a caller can provoke is a :class:`StripeError`. Arguments of a wrong type raise
:class:`ArgumentTypeError` (also a ``TypeError``), of a wrong value :class:`ArgumentError`
(also a ``ValueError``), naming the argument; Tile and IR text report their mistakes with a
line and column (:class:`TileError`, :class:`IRParseError`); sizes past the documented
limits (docs/limits.md) raise :class:`LimitError`. What each entry point accepts is in its
docstring: :func:`compile` and :meth:`Program.run` (``stripe.compiler``), the array helpers
(``stripe.arrays``).
"""

from __future__ import annotations

from . import _checkout, arrays  # noqa: F401  (_checkout first: it maps the subpackages)
from .affine import Affine
from .arrays import ArgumentError, ArgumentTypeError
from .compiler import Program, compile
from .config import Config, ConfigError, list_configs, load_config
from .dtypes import DType
from .errors import (
    CompileError,
    InterpreterError,
    IRError,
    IRParseError,
    LimitError,
    ShapeError,
    StripeError,
    TileError,
    TileSyntaxError,
    VerifyError,
)
from .gradient import GradientError, gradient
from .interp import interpret
from .ir import (
    AggOp,
    Block,
    Constant,
    Index,
    Intrinsic,
    Load,
    LoadIndex,
    Location,
    RefDir,
    Refinement,
    Special,
    Store,
    TensorDim,
    TensorShape,
)
from .irparser import parse_ir
from .passes.manager import PassError, run_pipeline
from .printer import print_ir
from .target import HOST, Target
from .tile import lower
from .verify import verify

__version__ = "0.1.0"

__all__ = [
    "Affine", "AggOp", "ArgumentError", "ArgumentTypeError", "arrays", "Block", "CompileError",
    "Constant", "DType", "GradientError", "IRError", "IRParseError", "gradient",
    "HOST", "Index", "Program", "compile", "Config", "ConfigError", "PassError", "Target",
    "list_configs",
    "load_config", "run_pipeline",
    "InterpreterError", "Intrinsic", "LimitError", "Load", "LoadIndex", "Location", "RefDir",
    "Refinement",
    "ShapeError", "Special", "StripeError", "Store", "TensorDim", "TensorShape", "TileError",
    "TileSyntaxError", "VerifyError", "interpret", "lower", "parse_ir", "print_ir", "verify",
]
