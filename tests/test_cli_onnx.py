"""``stripe run MODEL.onnx``: import, compile for the target, run, and ``--check`` against
ONNX Runtime (or the interpreter where it is not installed)."""

from __future__ import annotations

import numpy as np
import pytest

from stripe.cli import main

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _model(path) -> None:  # type: ignore[no-untyped-def]
    """Y = relu(X @ W + B) with a symbolic batch dimension N."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((5, 7)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(7).astype(np.float32), "B")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["in.x", "W"], ["t"]),
         helper.make_node("Add", ["t", "B"], ["u"]),
         helper.make_node("Relu", ["u"], ["out:y"])],
        "mlp", [helper.make_tensor_value_info("in.x", TensorProto.FLOAT, ["N", 5])],
        [helper.make_tensor_value_info("out:y", TensorProto.FLOAT, ["N", 7])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def test_run_an_onnx_model_and_check_it(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    _model(path)
    for target in ("cpu_generic", "none"):
        assert main(["run", str(path), "--input", "in.x=3x5", "--check", "--target", target]) == 0
        out = capsys.readouterr().out
        assert "out:y: 3x7 float32" in out and "(ok)" in out
        assert "check against ONNX Runtime" in out or "check against the interpreter" in out


def test_an_onnx_model_needs_its_symbolic_shapes(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    _model(path)
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stripe: error:") and "in.x" in err
    assert main(["run", str(path), "--input", "in.x=3x5", "--interpret"]) == 2
    assert "--interpret is for Tile files" in capsys.readouterr().err


def test_without_onnx_runtime_the_check_uses_the_interpreter(tmp_path, capsys, monkeypatch):
    import sys

    path = tmp_path / "mlp.onnx"
    _model(path)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import raises ImportError
    assert main(["run", str(path), "--input", "in.x=4x5", "--check",
                 "--target", "cpu_generic"]) == 0
    out = capsys.readouterr().out
    assert "check against the interpreter (onnxruntime is not installed)" in out
    assert "(ok)" in out
