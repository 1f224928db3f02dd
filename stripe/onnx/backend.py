"""An ONNX backend (``onnx.backend.base.Backend``) running models through stripe.onnx.

::

    import stripe.onnx.backend as backend
    rep = backend.prepare(model, device="CPU")          # imports and compiles
    outputs = rep.run([x])                              # a tuple, in graph output order
    outputs = backend.run_model(model, [x])
    outputs = backend.run_node(node, [x])               # one node as a model

``target`` (a keyword of ``prepare``/``run_model``/``run_node``, default
:attr:`StripeBackend.target`, ``"cpu_generic"``) is the config the model is compiled for.
Only the ``CPU`` device is supported. onnx's backend test suite runs against it
(``onnx.backend.test.BackendTest(StripeBackend, __name__)``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper
from onnx.backend.base import Backend, BackendRep

from ..errors import ArgumentError
from . import compile as _compile
from . import load
from .program import NeedsConstant, OnnxProgram


class StripeRep(BackendRep):
    """A prepared model. When an operator needs a graph input as a constant (a ``Reshape``
    shape, ``Slice`` bounds, reduction axes fed as inputs, as onnx's node tests do), the
    model is imported and compiled at the first :meth:`run` with those inputs bound to the
    values given (``constants=`` of :func:`stripe.onnx.load`), and again for other values."""

    def __init__(self, model: onnx.ModelProto, target: str | None,
                 shapes: Mapping[str, Sequence[int]] | None) -> None:
        self.model = model
        self.target = target
        self.shapes = shapes
        self.input_names = tuple(vi.name for vi in model.graph.input
                                 if vi.name not in {i.name for i in model.graph.initializer})
        self.output_names = tuple(vi.name for vi in model.graph.output)
        self.bound: tuple[str, ...] = ()
        self._programs: dict[bytes, OnnxProgram] = {}
        try:
            self.program: OnnxProgram | None = _compile(load(model, shapes=shapes), target)
        except NeedsConstant as e:
            self.bound = self._bind_for(e, ())
            self.program = None

    def _bind_for(self, e: NeedsConstant, bound: tuple[str, ...]) -> tuple[str, ...]:
        """The inputs to bind after ``e``: its value if that is an input, else every
        integer input (a value computed from inputs)."""
        if e.value_name in self.input_names and e.value_name not in bound:
            return (*bound, e.value_name)
        ints = tuple(vi.name for vi in self.model.graph.input
                     if vi.name in self.input_names and vi.type.tensor_type.elem_type in
                     (onnx.TensorProto.INT64, onnx.TensorProto.INT32))
        if set(ints) <= set(bound):
            raise e
        return tuple(dict.fromkeys((*bound, *ints)))

    def _specialised(self, feeds: dict[str, np.ndarray]) -> OnnxProgram:
        key = b"".join(n.encode() + b"\0" + np.ascontiguousarray(feeds[n]).tobytes() + b"\0"
                       + str(feeds[n].dtype).encode() + str(feeds[n].shape).encode()
                       for n in self.bound if n in feeds)
        prog = self._programs.get(key)
        while prog is None:
            shapes = {k: np.shape(v) for k, v in feeds.items() if k not in self.bound}
            if self.shapes:
                shapes.update(self.shapes)
            try:
                fn = load(self.model, shapes=shapes,
                          constants={n: feeds[n] for n in self.bound if n in feeds})
                prog = _compile(fn, self.target)
            except NeedsConstant as e:
                self.bound = self._bind_for(e, self.bound)
                return self._specialised(feeds)
            self._programs[key] = prog
        return prog

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:  # noqa: ARG002
        """``inputs``: a sequence of arrays in the graph's input order, one array for a
        single input, or a mapping by name. Returns the outputs in graph order."""
        names = self.input_names
        if isinstance(inputs, Mapping):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray) and len(names) == 1:
                inputs = [inputs]
            seq = list(inputs)
            if len(seq) < len(names):
                raise ArgumentError(f"the model takes {len(names)} inputs, got {len(seq)}")
            feeds = dict(zip(names, seq))
        feeds = {k: np.asarray(v) for k, v in feeds.items() if k in names}
        prog = self.program if self.program is not None else self._specialised(feeds)
        out = prog.run({k: v for k, v in feeds.items() if k in prog.input_names})
        return tuple(out[k] for k in self.output_names)


class StripeBackend(Backend):
    """``onnx.backend.base.Backend`` for stripe (see the module docstring)."""

    target = "cpu_generic"

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().startswith("CPU")

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU",
                **kwargs: Any) -> StripeRep:
        if not cls.supports_device(device):
            raise ArgumentError(f"device {device!r} is not supported (CPU only)")
        return StripeRep(model, kwargs.pop("target", cls.target), kwargs.pop("shapes", None))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        """``node`` run as a one-node model on ``inputs`` (arrays in the node's input
        order); ``opset_version`` (keyword) chooses the opset, default onnx's current."""
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        arrays = [np.asarray(a) for a in inputs]
        names = [n for n in node.input if n]
        vis = [helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in zip(names, arrays)]
        outs = [helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None)
                for n in node.output if n]
        graph = helper.make_graph([node], "node", vis, outs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return cls.run_model(model, dict(zip(names, arrays)), device, **kwargs)


prepare = StripeBackend.prepare
run_model = StripeBackend.run_model
run_node = StripeBackend.run_node
supports_device = StripeBackend.supports_device
