"""The whole-model benchmark's machinery (benchmarks/models.py) on tiny models: the layer
extraction and batch-norm folding, the single-layer programs of stripe and ONNX Runtime,
the check against ONNX Runtime, the turns, the table and the plot. No timing is asserted."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from benchmarks import models as bm  # noqa: E402
from benchmarks import peer_worker as pw  # noqa: E402


def _conv_bn_model(rng: np.random.Generator) -> onnx.ModelProto:
    """input 1x3x8x8 -> Conv 3x3 (4) + BN + Relu -> Conv 3x3/2 (6) + BN -> Conv 3x3 (4)
    + BN + Relu on the 8x8 again, a second layer of the first one's shape."""
    inits, nodes = [], []

    def conv_bn(x: str, ci: int, co: int, stride: int, name: str, relu: bool) -> str:
        inits.append(numpy_helper.from_array(
            rng.standard_normal((co, ci, 3, 3)).astype(np.float32), f"{name}.w"))
        nodes.append(helper.make_node("Conv", [x, f"{name}.w"], [name], name=name,
                                      kernel_shape=[3, 3], strides=[stride] * 2, pads=[1] * 4))
        params = (rng.uniform(0.5, 1.5, co), rng.standard_normal(co), rng.standard_normal(co),
                  rng.uniform(0.5, 1.5, co))
        for p, a in zip(("g", "b", "m", "v"), params):
            inits.append(numpy_helper.from_array(a.astype(np.float32), f"{name}.{p}"))
        nodes.append(helper.make_node("BatchNormalization",
                                      [name] + [f"{name}.{p}" for p in "gbmv"],
                                      [name + "_bn"], epsilon=1e-5))
        if not relu:
            return name + "_bn"
        nodes.append(helper.make_node("Relu", [name + "_bn"], [name + "_r"]))
        return name + "_r"

    a = conv_bn("input", 3, 4, 1, "c1", True)
    conv_bn(a, 4, 6, 2, "c2", False)
    b = conv_bn("input", 3, 4, 1, "c3", True)
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info(b, TensorProto.FLOAT, None),
         helper.make_tensor_value_info("c2_bn", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_conv_layers_fold_the_batch_norm_and_count_shapes():
    rng = np.random.default_rng(0)
    model = _conv_bn_model(rng)
    layers = bm.conv_layers(model)
    assert [(la.name, la.count, la.stride, la.size) for la in layers] == [
        ("c1", 2, 1, 8), ("c2", 1, 2, 8)]
    assert bm.layer_label(layers[1]) == "3x3/2 4->6 @8->4"
    # the folded layer computes Conv + BN: compare with the reference evaluator of onnx
    from onnx.reference import ReferenceEvaluator

    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = ReferenceEvaluator(model).run(["c1_bn"], {"input": x})[0]
    got = ReferenceEvaluator(bm.layer_onnx(layers[0], 1)).run(["c"], {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_stripe_layer_matches_the_onnx_layer():
    import stripe

    rng = np.random.default_rng(1)
    dense = bm.conv_layers(_conv_bn_model(rng))[1]          # 3x3 stride 2, pad 1
    depthwise = bm.Layer("dw", rng.standard_normal((5, 1, 3, 3)).astype(np.float32),
                         rng.standard_normal(5).astype(np.float32), 2, 1, 7, 1, True)
    assert bm.layer_label(depthwise) == "3x3/2 dw 5->5 @7->4"
    from onnx.reference import ReferenceEvaluator

    for layer, shape in ((dense, (2, 6, 4, 4)), (depthwise, (2, 5, 4, 4))):
        src, types = bm.layer_tile(layer, 2)
        ci = layer.channels[0]
        x = rng.standard_normal((2, ci, layer.size, layer.size)).astype(np.float32)
        ins = bm.layer_inputs(layer, x)
        assert {k: v.shape for k, v in ins.items()} == {k: t[0] for k, t in types.items()}
        got = stripe.interpret(stripe.lower(src, ins), ins)["O"].transpose(0, 3, 1, 2)
        want = ReferenceEvaluator(bm.layer_onnx(layer, 2)).run(None, {"x": x})[0]
        assert got.shape == want.shape == shape
        assert pw.relative_error({"y": got}, {"y": want}) < 1e-5


def test_relative_error_is_against_the_output_scale():
    want = {"y": np.array([10.0, -20.0], np.float32)}
    assert pw.relative_error({"y": np.array([10.0, -19.98], np.float32)}, want) == \
        pytest.approx(0.001, rel=1e-3)
    assert pw.relative_error({}, want) == float("inf")                       # missing
    assert pw.relative_error({"y": np.zeros(3, np.float32)}, want) == float("inf")  # shape


def test_a_model_is_checked_against_onnx_runtime(tmp_path):
    pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(2)
    path = tmp_path / "tiny.onnx"
    onnx.save(_conv_bn_model(rng), str(path))
    np.savez(tmp_path / "x.npz", input=rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    builder = pw.ort_builder()
    reply, run = pw.prepare_model(builder, {"path": str(path), "inputs": str(tmp_path / "x.npz"),
                                            "save": str(tmp_path / "ref.npz")})
    assert reply["check"] == "reference" and run is not None
    with np.load(tmp_path / "ref.npz") as z:
        ref = {k: z[k] for k in z.files}
    assert set(ref) == {"c3_r", "c2_bn"}
    reply, run = pw.prepare_model(builder, {"path": str(path), "inputs": str(tmp_path / "x.npz"),
                                            "ref": str(tmp_path / "ref.npz"), "tol": 1e-3})
    assert reply["check"].startswith("ok") and run is not None
    # stripe's program of the same file passes the same check
    prog, _ = bm.compile_stripe(str(path), {"input": np.zeros((1, 3, 8, 8), np.float32)})
    with np.load(tmp_path / "x.npz") as z:
        assert pw.relative_error(prog.run({"input": z["input"]}), ref) < 1e-3
    # a wrong reference fails the check and the model is not kept for timing
    np.savez(tmp_path / "bad.npz", **{k: v + 1.0 for k, v in ref.items()})
    reply, run = pw.prepare_model(builder, {"path": str(path), "inputs": str(tmp_path / "x.npz"),
                                            "ref": str(tmp_path / "bad.npz"), "tol": 1e-3})
    assert reply["check"].startswith("FAILED") and run is None


def test_turns_time_every_system_every_round():
    calls = []
    timed = bm.time_in_turns({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                             {}, {}, rounds=3, calls=2, settle=0.0, warm_s=0.0)
    cpu = timed.pop("_cpu")
    assert set(timed) == set(cpu) == {"a", "b"}
    assert [len(r) for r in timed["a"]] == [2, 2, 2]
    assert calls.count("a") == calls.count("b") == 3 * 3  # 2 timed + 1 warm-up per round
    assert calls[0] == "a" and calls[3] == "b"           # the first system rotates


def test_model_inputs_are_seeded_and_shaped():
    a = bm.model_inputs(bm.MODELS["bert"], 2)
    b = bm.model_inputs(bm.MODELS["bert"], 2)
    assert {k: v.shape for k, v in a.items()} == {"hidden_states": (2, 128, 768),
                                                  "attention_mask": (2, 1, 1, 128)}
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert bm.model_inputs(bm.MODELS["resnet18"], 1)["input"].shape == (1, 3, 224, 224)


def _fake_result() -> dict:
    def sys_(ms: float) -> dict:
        return {"median_s": ms / 1e3, "check": "ok relative error 1e-07",
                "paired_vs_ort": {"ratio": 10.0 / ms, "rounds": []}}
    case = {"model": "resnet18", "batch": 1, "stripe": sys_(8.0), "torch": sys_(20.0),
            "ort": {"median_s": 0.010, "check": "reference"}}
    return {"runs": [{"threads": 1, "host": "host = cpu_avx2, units 1",
                      "loadavg_before": [0.5], "loadavg_after": [0.6],
                      "cases": {"resnet18_b1": case}}]}


def test_the_table_gives_ratios_to_onnx_runtime(tmp_path):
    md = bm.markdown(_fake_result())
    row = next(line for line in md.splitlines() if line.startswith("| ResNet-18"))
    assert row.split("|")[3:9] == [" 8.00 ", " 10.00 ", " 20.00 ", " 1.25 ", " 1.25 ", " 0.50 "]
    pytest.importorskip("matplotlib")
    out = bm.plot(_fake_result(), tmp_path / "m.svg")
    assert out.endswith("m.svg") and (tmp_path / "m.svg").stat().st_size > 1000


def test_bad_options_are_clear_errors():
    with pytest.raises(SystemExit, match="unknown"):
        bm.main(["--models", "resnet19"])
    with pytest.raises(SystemExit, match="positive"):
        bm.main(["--models", "resnet18", "--batches", "0"])
    with pytest.raises(SystemExit, match="integers"):
        bm.main(["--models", "resnet18", "--threads", "two"])
