"""stripe.onnx: small models built with onnx.helper (odd shapes, seeded weights), compiled
with cpu_generic and cpu_avx2, compared with ONNX Runtime; names, weights, shape bindings
and the errors."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="stripe.onnx needs the onnx package")
ort = pytest.importorskip("onnxruntime", reason="the reference is onnxruntime, not installed")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import stripe  # noqa: E402
import stripe.onnx  # noqa: E402

CONFIGS = ("cpu_generic", "cpu_avx2")
F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=17, name="m"):
    """A ModelProto: ``inputs``/``outputs`` as (name, elem type, shape or None)."""
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def reference(m, feeds):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def check(m, feeds, shapes=None, configs=CONFIGS, tol=1e-4, channels_last=True):
    """Import ``m``, compile it for each config, compare every output with ORT (relative to
    the output's scale)."""
    fn = stripe.onnx.load(m, shapes=shapes, channels_last=channels_last)
    want = reference(m, feeds)
    for cfg in configs:
        got = stripe.onnx.compile(fn, cfg).run(feeds)
        assert set(got) == set(want)
        for k, w in want.items():
            g = got[k]
            assert g.shape == w.shape, (cfg, k)
            assert g.dtype == w.dtype, (cfg, k)
            scale = max(float(np.max(np.abs(w))), 1e-6) if w.size and w.dtype.kind == "f" \
                else 1.0
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=0, atol=tol * scale,
                                           err_msg=f"{cfg} output {k}")
            else:
                np.testing.assert_array_equal(g, w, err_msg=f"{cfg} output {k}")
    return fn


def w(rng, *shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_cnn_block(rng, channels_last):
    """Conv (groups, dilations, asymmetric pads, SAME_UPPER, bias), batch norm folded and
    not folded, Relu, Clip, LeakyRelu, HardSwish, Concat (channels, rows), MaxPool
    (ceil_mode), AveragePool, residual Add, GlobalAveragePool, Flatten, Gemm (transB),
    Softmax."""
    n_c = 6
    inits = [
        ("w1", w(rng, n_c, 3, 3, 3)), ("b1", w(rng, n_c)),
        ("s", (rng.random(n_c) + 0.5).astype(np.float32)), ("bb", w(rng, n_c)),
        ("mu", w(rng, n_c)), ("var", (rng.random(n_c) + 0.5).astype(np.float32)),
        ("w2", w(rng, n_c, 2, 3, 3)),                      # groups 3
        ("w3", w(rng, n_c, 1, 3, 3)),                      # depthwise, dilation 2
        ("lo", np.array(-0.5, np.float32)), ("hi", np.array(1.5, np.float32)),
        ("fc", w(rng, 5, 2 * n_c)), ("fcb", w(rng, 5)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 0, 2, 1],
                         strides=[2, 1]),
        helper.make_node("BatchNormalization", ["c1", "s", "bb", "mu", "var"], ["bn1"],
                         epsilon=1e-3),
        helper.make_node("Relu", ["bn1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], group=3, auto_pad="SAME_UPPER"),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["k2"]),
        helper.make_node("Conv", ["k2", "w3"], ["c3"], group=n_c, dilations=[2, 2],
                         pads=[2, 2, 2, 2]),
        # c3 feeds both the batch norm and the residual add: not folded
        helper.make_node("BatchNormalization", ["c3", "s", "bb", "mu", "var"], ["bn3"]),
        helper.make_node("HardSwish", ["bn3"], ["h3"]),
        helper.make_node("Add", ["h3", "c3"], ["res"]),
        helper.make_node("LeakyRelu", ["res"], ["l3"], alpha=0.1),
        helper.make_node("Concat", ["l3", "c3"], ["cat"], axis=1),
        helper.make_node("Concat", ["cat", "cat"], ["cat2"], axis=-2),
        helper.make_node("MaxPool", ["cat2"], ["mp"], kernel_shape=[3, 2], strides=[2, 2],
                         ceil_mode=1),
        helper.make_node("AveragePool", ["l3"], ["ap"], kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["mp"], ["gp"]),
        helper.make_node("Flatten", ["gp"], ["fl"]),
        helper.make_node("Gemm", ["fl", "fc", "fcb"], ["logits"], transB=1, alpha=0.7),
        helper.make_node("Softmax", ["logits"], ["prob"]),
    ]
    m = model(nodes, [("x", F, ["batch", 3, 11, 9])],
              [("prob", F, None), ("ap", F, None)], inits)
    x = rng.standard_normal((2, 3, 11, 9)).astype(np.float32)
    fn = check(m, {"x": x}, shapes={"x": (2, 3, 11, 9)}, channels_last=channels_last,
               configs=("cpu_avx2",) if channels_last else CONFIGS)
    # the first batch norm is folded into its conv, the second is not
    assert "w1__bn" in " ".join(fn.weights) and "w3" in " ".join(fn.weights)
    # channels-last: the activations stay NHWC from the first conv to the pools (through
    # both concatenations); the transposes are the input's and the one before Flatten, and
    # the AveragePool output is transposed as it is written to Out_ap
    assert fn.source.count("\n    Transpose") == (2 if channels_last else 0)
    assert ("Out_ap[i0, i3, i1, i2" in fn.source) == channels_last
    assert ("_hwio[" in fn.source) == channels_last


def test_transformer_block(rng):
    """MatMul, Add, Softmax, LayerNormalization, Erf-based Gelu, Transpose, Reshape with a
    shape computed by Shape/Gather/Concat (folded at import), Split, Concat, Slice, Gather,
    Where, Equal, Cast, ReduceMean, Sqrt, Pow, Div, Sub, Unsqueeze, Squeeze."""
    s, d, h = 5, 12, 3
    inits = [
        ("wq", w(rng, d, d)), ("wk", w(rng, d, d)), ("wv", w(rng, d, d)),
        ("g", (rng.random(d) + 0.5).astype(np.float32)), ("be", w(rng, d)),
        ("heads", np.array([h, d // h], np.int64)), ("two", np.array(2.0, np.float32)),
        ("half", np.array(0.5, np.float32)), ("one", np.array(1.0, np.float32)),
        ("r2", np.array(1.4142135623730951, np.float32)),
        ("ax0", np.array([0], np.int64)), ("idx", np.array([2, 0, 4], np.int64)),
        ("st", np.array([1], np.int64)), ("en", np.array([100], np.int64)),
        ("ax2", np.array([2], np.int64)), ("minus1", np.array(-1, np.int64)),
        ("spl", np.array([5, 7], np.int64)), ("am1", np.array([-1], np.int64)),
    ]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "g", "be"], ["ln"], epsilon=1e-5),
        helper.make_node("MatMul", ["ln", "wq"], ["q"]),
        helper.make_node("MatMul", ["ln", "wk"], ["k"]),
        helper.make_node("MatMul", ["ln", "wv"], ["v"]),
        helper.make_node("Shape", ["q"], ["qs"]),
        helper.make_node("Slice", ["qs", "ax0", "ax2"], ["qs2"]),       # [1, S]
        helper.make_node("Concat", ["qs2", "heads"], ["qshape"], axis=0),
        helper.make_node("Reshape", ["q", "qshape"], ["q4"]),
        helper.make_node("Reshape", ["k", "qshape"], ["k4"]),
        helper.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["qt", "kt"], ["sc"]),
        helper.make_node("Softmax", ["sc"], ["att"], axis=-1),
        helper.make_node("ReduceMean", ["att"], ["attm"], axes=[1], keepdims=0),
        helper.make_node("MatMul", ["attm", "v"], ["ctx"]),
        helper.make_node("Div", ["ctx", "r2"], ["ctx2"]),
        helper.make_node("Erf", ["ctx2"], ["erf"]),
        helper.make_node("Add", ["erf", "one"], ["erf1"]),
        helper.make_node("Mul", ["ctx", "erf1"], ["gx"]),
        helper.make_node("Mul", ["gx", "half"], ["gelu"]),
        helper.make_node("Pow", ["gelu", "two"], ["sq"]),
        helper.make_node("Sqrt", ["sq"], ["ab"]),
        helper.make_node("Sub", ["ab", "x"], ["y"]),
        helper.make_node("Split", ["y", "spl"], ["y0", "y1"], axis=2),
        helper.make_node("Concat", ["y1", "y0"], ["yc"], axis=2),
        helper.make_node("Slice", ["yc", "st", "en", "ax2"], ["ys"]),
        helper.make_node("Gather", ["ys", "idx"], ["yg"], axis=1),
        helper.make_node("Gather", ["ys", "minus1"], ["ylast"], axis=2),
        helper.make_node("Unsqueeze", ["ylast", "am1"], ["yu"]),
        helper.make_node("Squeeze", ["yu", "am1"], ["ysq"]),
        helper.make_node("Cast", ["ysq"], ["yi"], to=TensorProto.INT32),
        helper.make_node("Cast", ["yi"], ["yf"], to=TensorProto.FLOAT),
        helper.make_node("Equal", ["yf", "ysq"], ["eq"]),
        helper.make_node("Where", ["eq", "ysq", "yf"], ["out"]),
    ]
    m = model(nodes, [("x", F, [1, s, d])],
              [("out", F, None), ("yg", F, None), ("eq", TensorProto.BOOL, None)], inits)
    x = rng.standard_normal((1, s, d)).astype(np.float32)
    x[0, 0, 0] = 3.0  # one exact integer for Equal
    check(m, {"x": x}, configs=("cpu_avx2",))


def test_misc_operators(rng):
    """ConvTranspose, Pad (reflect, edge, constant), Resize (nearest, linear), Sigmoid,
    Tanh, Exp, Log, Abs, ReduceMax/Sum/Min (axes as input), Expand, Dropout, Identity,
    Less/Greater, Max, Neg, MaxPool with dilations."""
    inits = [("wt", w(rng, 3, 2, 3, 3)), ("bt", w(rng, 2)),
             ("pads", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)),
             ("pads2", np.array([0, 0, 2, 1, 0, 0, 0, 3], np.int64)),
             ("pv", np.array(0.25, np.float32)),
             ("scales", np.array([1, 1, 2, 3], np.float32)),
             ("sizes", np.array([1, 2, 9, 4], np.int64)),
             ("rax", np.array([3], np.int64)), ("eshape", np.array([2, 1, 1, 1], np.int64))]
    nodes = [
        helper.make_node("ConvTranspose", ["x", "wt", "bt"], ["ct"], strides=[2, 2],
                         pads=[1, 0, 0, 1], output_padding=[1, 0]),
        helper.make_node("Pad", ["ct", "pads"], ["pr"], mode="reflect"),
        helper.make_node("Pad", ["ct", "pads2"], ["pe"], mode="edge"),
        helper.make_node("Pad", ["ct", "pads2", "pv"], ["pc"], mode="constant"),
        helper.make_node("Resize", ["ct", "", "scales"], ["rn"], mode="nearest"),
        helper.make_node("Resize", ["ct", "", "", "sizes"], ["rl"], mode="linear",
                         coordinate_transformation_mode="align_corners"),
        helper.make_node("Sigmoid", ["pr"], ["sg"]),
        helper.make_node("Tanh", ["pe"], ["th"]),
        helper.make_node("Abs", ["pc"], ["pa"]),
        helper.make_node("Log", ["pa"], ["lg"]),
        helper.make_node("Exp", ["rl"], ["ex"]),
        helper.make_node("ReduceMax", ["sg", "rax"], ["rm"], keepdims=1),
        helper.make_node("ReduceSum", ["th", "rax"], ["rs"], keepdims=0),
        helper.make_node("ReduceMin", ["lg"], ["rmin"], keepdims=0),
        helper.make_node("Expand", ["rm", "eshape"], ["exp"]),
        helper.make_node("Dropout", ["exp"], ["dr"]),
        helper.make_node("Identity", ["dr"], ["idn"]),
        helper.make_node("Neg", ["idn"], ["ng"]),
        helper.make_node("Max", ["ng", "idn"], ["mx"]),
        helper.make_node("MaxPool", ["ct"], ["mpd"], kernel_shape=[2, 2], dilations=[2, 1],
                         pads=[1, 0, 0, 1], strides=[2, 1]),
        helper.make_node("Less", ["rn", "pv"], ["ls"]),
        helper.make_node("Greater", ["ex", "pv"], ["gt"]),
    ]
    m = model(nodes, [("x", F, [1, 3, 4, 3])],
              [("mx", F, None), ("rs", F, None), ("rmin", F, None), ("ls", TensorProto.BOOL,
                                                                     None),
               ("gt", TensorProto.BOOL, None), ("mpd", F, None)], inits, opset=18)
    x = rng.standard_normal((1, 3, 4, 3)).astype(np.float32)
    check(m, {"x": x}, configs=("cpu_generic",))


def test_average_pool_with_dilations(rng):
    """AveragePool with dilations (opset 19), ceil_mode, padding not counted."""
    m = model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 3],
                                dilations=[3, 2], pads=[1, 1, 1, 2], ceil_mode=1)],
              [("x", F, [1, 2, 9, 7])], [("y", F, None)], opset=19)
    check(m, {"x": rng.standard_normal((1, 2, 9, 7)).astype(np.float32)},
          configs=("cpu_generic",))


def test_names_are_mapped_and_kept(rng):
    """ONNX names with any characters stay as they are in the dict API; Tile names are
    valid, deterministic and distinct even when two ONNX names map to the same text."""
    nodes = [helper.make_node("Add", ["in.put:0", "in-put:0"], ["out/1"]),
             helper.make_node("Mul", ["out/1", "in.put:0"], ["out 1"])]
    m = model(nodes, [("in.put:0", F, [3, 2]), ("in-put:0", F, [3, 2])],
              [("out/1", F, None), ("out 1", F, None)])
    fn = stripe.onnx.load(m)
    assert fn.inputs == ("in.put:0", "in-put:0")
    assert fn.outputs == ("out/1", "out 1")
    assert fn.input_map == {"in.put:0": "In_in_put_0", "in-put:0": "In_in_put_0_2"}
    assert fn.output_map == {"out/1": "Out_out_1", "out 1": "Out_out_1_2"}
    assert stripe.onnx.load(m).source == fn.source
    for raw in ("in.put", "in-put", "out/1", "out 1"):
        assert raw not in fn.source
    a = rng.standard_normal((3, 2)).astype(np.float32)
    b = rng.standard_normal((3, 2)).astype(np.float32)
    got = stripe.onnx.compile(fn, "cpu_generic").run({"in.put:0": a, "in-put:0": b})
    np.testing.assert_allclose(got["out/1"], a + b, rtol=1e-6)
    np.testing.assert_allclose(got["out 1"], (a + b) * a, rtol=1e-6)


def test_weights_stay_out_of_the_c_source(rng):
    """Initializers are Tile inputs bound at compile time: the C source and the printed
    Tile hold their shapes, never their values."""
    wt = np.full((7, 5), 0.123456789, np.float32)
    m = model([helper.make_node("MatMul", ["x", "wt"], ["y"])], [("x", F, [2, 7])],
              [("y", F, None)], [("wt", wt)])
    fn = stripe.onnx.load(m)
    assert "W_wt[7, 5]" in fn.source and "0.1234" not in fn.source
    prog = stripe.onnx.compile(fn, "cpu_generic")
    assert "0.1234" not in prog.c_source
    assert prog.input_names == ("x",)
    x = rng.standard_normal((2, 7)).astype(np.float32)
    np.testing.assert_allclose(prog.run({"x": x})["y"], x @ wt, rtol=1e-5)
    assert "W_wt" in prog.program.input_names
    # stripe.compile of the function gives the same kind of program
    prog2 = stripe.compile(fn, target="cpu_generic")
    assert isinstance(prog2, stripe.onnx.OnnxProgram)
    np.testing.assert_allclose(prog2.run({"x": x})["y"], x @ wt, rtol=1e-5)


def test_shape_bindings(rng):
    """A symbolic dimension needs a binding, named in the error; a binding that contradicts
    a fixed dimension or names no input is refused."""
    m = model([helper.make_node("Relu", ["x"], ["y"])], [("x", F, ["batch", 4])],
              [("y", F, None)])
    with pytest.raises(stripe.onnx.OnnxImportError, match=r"input 'x'.*'batch'.*shapes="):
        stripe.onnx.load(m)
    with pytest.raises(stripe.ArgumentError, match=r"dimension 1 is 4"):
        stripe.onnx.load(m, shapes={"x": (2, 5)})
    with pytest.raises(stripe.ArgumentError, match=r"'z' is not an input"):
        stripe.onnx.load(m, shapes={"x": (2, 4), "z": (1,)})
    fn = stripe.onnx.load(m, shapes={"x": (3, 4)})
    assert fn.input_shapes == {"x": ((3, 4), "float32")}


def test_unsupported_operator_names_node_and_op():
    m = model([helper.make_node("Relu", ["x"], ["r"], name="first"),
               helper.make_node("NonMaxSuppression", ["r"], ["y"], name="nms")],
              [("x", F, [4])], [("y", F, None)])
    with pytest.raises(stripe.onnx.OnnxImportError,
                       match=r"node 'nms' \(NonMaxSuppression\): operator not supported"):
        stripe.onnx.load(m)
    m = model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2], ceil_mode=1,
                                count_include_pad=1, name="ap")],
              [("x", F, [1, 1, 6])], [("y", F, None)])
    with pytest.raises(stripe.onnx.OnnxImportError,
                       match=r"node 'ap' \(AveragePool\): ceil_mode=1 with count_include_pad"):
        stripe.onnx.load(m)


def test_run_errors_use_onnx_names(rng):
    m = model([helper.make_node("Relu", ["in.0"], ["y"])], [("in.0", F, [2])],
              [("y", F, None)])
    prog = stripe.onnx.compile(stripe.onnx.load(m), "cpu_generic")
    with pytest.raises(stripe.ArgumentError, match=r"'in.0' is missing"):
        prog.run({})
    with pytest.raises(stripe.ArgumentError, match=r"'q' is not an input"):
        prog.run({"in.0": np.zeros(2, np.float32), "q": np.zeros(2, np.float32)})
    with pytest.raises(stripe.ArgumentTypeError):
        prog.run([np.zeros(2, np.float32)])
    with pytest.raises(stripe.ArgumentError, match=r"input 'in.0' has shape \(3,\)"):
        prog.run({"in.0": np.zeros(3, np.float32)})
    with pytest.raises(stripe.ArgumentTypeError, match=r"input 'in.0'"):
        prog.run({"in.0": [1.0, 2.0]})


def test_bad_arguments(tmp_path):
    with pytest.raises(stripe.ArgumentTypeError):
        stripe.onnx.load(42)
    with pytest.raises(stripe.ArgumentError, match="cannot read"):
        stripe.onnx.load(tmp_path / "missing.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xff\xfe not a model")
    with pytest.raises(stripe.onnx.OnnxImportError, match="not an ONNX model"):
        stripe.onnx.load(bad)


def test_load_from_path_and_constant_folding(tmp_path, rng):
    """A model saved to a file; Shape -> ConstantOfShape -> Add is folded at import (a
    weight of zeros), Constant nodes become literals or weights."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["z"],
                              value=numpy_helper.from_array(np.array([1.5], np.float32))),
             helper.make_node("Constant", [], ["c"], value_float=2.0),
             helper.make_node("Mul", ["x", "c"], ["xc"]),
             helper.make_node("Add", ["xc", "z"], ["y"])]
    m = model(nodes, [("x", F, [2, 3])], [("y", F, None)])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    fn = stripe.onnx.load(str(path))
    assert "float32(2.0)" in fn.source or "2.0" in fn.source
    x = rng.standard_normal((2, 3)).astype(np.float32)
    got = stripe.onnx.compile(fn, "cpu_generic").run({"x": x})["y"]
    np.testing.assert_allclose(got, x * 2 + 1.5, rtol=1e-6)


def test_constants_bind_inputs(rng):
    """An input that an operator needs as a constant (a Reshape shape) is refused with
    NeedsConstant naming it, and works when bound with constants=."""
    m = model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="rs")],
              [("x", F, [2, 6]), ("shape", TensorProto.INT64, [2])], [("y", F, None)])
    with pytest.raises(stripe.onnx.NeedsConstant, match=r"node 'rs' \(Reshape\): shape") as e:
        stripe.onnx.load(m)
    assert e.value.value_name == "shape"
    fn = stripe.onnx.load(m, constants={"shape": np.array([3, -1], np.int64)})
    assert fn.inputs == ("x",)
    x = rng.standard_normal((2, 6)).astype(np.float32)
    got = stripe.onnx.compile(fn, "cpu_generic").run({"x": x})["y"]
    np.testing.assert_array_equal(got, x.reshape(3, 4))
    with pytest.raises(stripe.ArgumentError, match="dtype int32"):
        stripe.onnx.load(m, constants={"shape": np.array([3, -1], np.int32)})


def _doc_model():
    r = np.random.default_rng(0)
    inits = [(n, a.astype(np.float32)) for n, a in [
        ("conv1.weight", r.standard_normal((8, 3, 3, 3))),
        ("bn1.weight", r.random(8) + 0.5), ("bn1.bias", r.standard_normal(8)),
        ("bn1.running_mean", r.standard_normal(8)), ("bn1.running_var", r.random(8) + 0.5),
        ("fc.weight", r.standard_normal((10, 8))), ("fc.bias", r.standard_normal(10))]]
    nodes = [
        helper.make_node("Conv", ["input.1", "conv1.weight"], ["/conv1/Conv_output_0"],
                         pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["/conv1/Conv_output_0", "bn1.weight",
                         "bn1.bias", "bn1.running_mean", "bn1.running_var"], ["/bn1/out"]),
        helper.make_node("Relu", ["/bn1/out"], ["/relu/out"]),
        helper.make_node("GlobalAveragePool", ["/relu/out"], ["/pool/out"]),
        helper.make_node("Flatten", ["/pool/out"], ["/flat/out"]),
        helper.make_node("Gemm", ["/flat/out", "fc.weight", "fc.bias"], ["logits"], transB=1),
    ]
    return model(nodes, [("input.1", F, ["batch", 3, 32, 32])], [("logits", F, ["batch", 10])],
                 inits)


def _doc_block(heading):
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "onnx.md").read_text()
    rest = text[text.index(heading):]
    start = rest.index("```tile\n") + len("```tile\n")
    return rest[start:rest.index("```", start)]


def test_docs_example_is_what_load_prints(rng):
    m = _doc_model()
    fn = stripe.onnx.load(m, shapes={"input.1": (1, 3, 32, 32)})
    assert fn.source == _doc_block("## An example")
    nchw = stripe.onnx.load(m, shapes={"input.1": (1, 3, 32, 32)}, channels_last=False)
    assert nchw.source == _doc_block("## Layout")
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    got = stripe.onnx.compile(fn, "cpu_generic").run({"input.1": x})["logits"]
    want = reference(m, {"input.1": x})["logits"]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())


def test_resnet18_imports():
    """examples/models/resnet.py builds a valid ResNet-18 that imports whole: every batch
    norm folded, NHWC from the first convolution to the global pool (compiling and running
    it against ONNX Runtime is the script's --check)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "models" / "resnet.py"
    spec = importlib.util.spec_from_file_location("resnet_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m = mod.build(18, seed=0)
    fn = stripe.onnx.load(m, shapes={"input": (1, 3, 224, 224)})
    assert fn.output_shapes == {"logits": ((1, 1000), "float32")}
    convs = sum(n.op_type == "Conv" for n in m.graph.node)
    assert convs == 20
    assert fn.source.count("= +(") == convs + 2  # the convs, the global pool, the fc
    assert fn.source.count("= =(") == 2  # the input's transpose and the one before Flatten
    # the weights: every kernel and the fc, plus one bias per conv channel (the folded batch
    # norms' four vectors each are gone)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    kernels = sum(a.size for k, a in inits.items() if "_bn." not in k)
    channels = sum(a.size for k, a in inits.items() if k.endswith("_bn.bias"))
    assert sum(a.size for a in fn.weights.values()) == kernels + channels


def test_mobilenetv2_imports():
    """examples/models/mobilenet.py: depthwise convolutions, ReLU6 as Clip and residual
    adds import whole, NHWC from the first convolution to the global pool."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "models" / "mobilenet.py"
    spec = importlib.util.spec_from_file_location("mobilenet_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m = mod.build(seed=0)
    fn = stripe.onnx.load(m, shapes={"input": (1, 3, 224, 224)})
    assert fn.output_shapes == {"logits": ((1, 1000), "float32")}
    convs = sum(n.op_type == "Conv" for n in m.graph.node)
    assert convs == 52
    assert fn.source.count("= +(") == convs + 2
    assert fn.source.count("= =(") == 2
    assert len(fn.weights) == 2 * convs + 2  # kernel and folded bias per conv, the fc's two


def test_bert_layer_small(rng):
    """examples/models/bert.py's encoder layer (smaller sizes, symbolic batch and sequence
    bound by shapes) against ONNX Runtime."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "models" / "bert.py"
    spec = importlib.util.spec_from_file_location("bert_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m = mod.build(hidden=24, heads=3, ffn=40, seed=1)
    feeds = {"hidden_states": rng.standard_normal((2, 7, 24)).astype(np.float32),
             "attention_mask": np.where(rng.random((2, 1, 1, 7)) < 0.2, -10000.0,
                                        0.0).astype(np.float32)}
    check(m, feeds, shapes={k: v.shape for k, v in feeds.items()}, configs=("cpu_generic",))
