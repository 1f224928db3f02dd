"""MobileNetV2 as an ONNX model built with onnx.helper, seeded random weights.

Nothing is downloaded. torchvision's layout: NCHW; each Conv followed by
BatchNormalization and Clip(0, 6) (ReLU6) except the projections; inverted residual blocks
(1x1 expansion, 3x3 depthwise with ``group`` = channels, 1x1 projection, a residual Add
where the shape is kept); GlobalAveragePool, Flatten, Gemm to 1000 classes. The input is
``input`` with a symbolic batch dimension ``batch``; the output ``logits``.

    python examples/models/mobilenet.py -o mobilenetv2.onnx
    python examples/models/mobilenet.py --check cpu_avx2      # compare with ONNX Runtime
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# (expansion t, output channels c, repeats n, first stride s), torchvision's table
_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
             (6, 160, 3, 2), (6, 320, 1, 1)]


def build(seed: int = 0, classes: int = 1000) -> onnx.ModelProto:
    """MobileNetV2 (width 1.0) with weights drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits = [numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
             numpy_helper.from_array(np.array(6.0, np.float32), "six")]
    count = [0]

    def init(name: str, a: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(a.astype(np.float32), name))
        return name

    def conv_bn(x: str, c_in: int, c_out: int, k: int, stride: int, groups: int,
                relu6: bool) -> str:
        count[0] += 1
        n = f"conv_{count[0]}"
        w = rng.standard_normal((c_out, c_in // groups, k, k)) * np.sqrt(2.0 / (c_in // groups
                                                                             * k * k))
        nodes.append(helper.make_node("Conv", [x, init(n + ".weight", w)], [n], name=n,
                                      kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[k // 2] * 4, group=groups))
        b = n + "_bn"
        params = [rng.uniform(0.5, 1.5, c_out), rng.standard_normal(c_out) * 0.1,
                  rng.standard_normal(c_out) * 0.1, rng.uniform(0.5, 1.5, c_out)]
        names = [init(f"{b}.{p}", a) for p, a in
                 zip(("weight", "bias", "running_mean", "running_var"), params)]
        nodes.append(helper.make_node("BatchNormalization", [n, *names], [b], name=b))
        if not relu6:
            return b
        nodes.append(helper.make_node("Clip", [b, "zero", "six"], [n + "_relu6"],
                                      name=n + "_relu6"))
        return n + "_relu6"

    x, c = conv_bn("input", 3, 32, 3, 2, 1, True), 32
    for t, c_out, repeats, first_stride in _SETTINGS:
        for i in range(repeats):
            stride = first_stride if i == 0 else 1
            hidden = c * t
            y = x if t == 1 else conv_bn(x, c, hidden, 1, 1, 1, True)
            y = conv_bn(y, hidden, hidden, 3, stride, hidden, True)
            y = conv_bn(y, hidden, c_out, 1, 1, 1, False)
            if stride == 1 and c == c_out:
                count[0] += 1
                nodes.append(helper.make_node("Add", [y, x], [f"add_{count[0]}"],
                                              name=f"add_{count[0]}"))
                y = f"add_{count[0]}"
            x, c = y, c_out
    x, c = conv_bn(x, c, 1280, 1, 1, 1, True), 1280
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flat"))
    fc_w = init("fc.weight", rng.standard_normal((classes, c)) / np.sqrt(c))
    fc_b = init("fc.bias", rng.standard_normal(classes) * 0.01)
    nodes.append(helper.make_node("Gemm", ["flat", fc_w, fc_b], ["logits"], name="fc",
                                  transB=1))
    graph = helper.make_graph(
        nodes, "mobilenetv2",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="stripe examples")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", help="write the model to this .onnx file")
    ap.add_argument("--check", metavar="TARGET",
                    help="import, compile for TARGET and compare with ONNX Runtime")
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args(argv)
    model = build(args.seed)
    if args.output:
        onnx.save(model, args.output)
    if args.check:
        import time

        import onnxruntime as ort

        import stripe.onnx

        x = np.random.default_rng(1).standard_normal((args.batch, 3, 224, 224)).astype(
            np.float32)
        t0 = time.perf_counter()
        prog = stripe.onnx.compile(stripe.onnx.load(model, shapes={"input": x.shape}),
                                   args.check)
        t1 = time.perf_counter()
        got = prog.run({"input": x})["logits"]
        t2 = time.perf_counter()
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        want = sess.run(None, {"input": x})[0]
        err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        print(f"import+compile {t1 - t0:.1f} s, run {t2 - t1:.3f} s, max error / scale "
              f"{err:.2e}")
        return 0 if err < 1e-3 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
