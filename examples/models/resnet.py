"""ResNet-18 / ResNet-50 as ONNX models built with onnx.helper, seeded random weights.

Nothing is downloaded. The graph is torchvision's layout (NCHW; Conv without bias, then
BatchNormalization, Relu; basic blocks for 18, bottlenecks for 50; a 1x1 stride-2 Conv
with batch norm on the shortcut where the shape changes; GlobalAveragePool, Flatten, Gemm
to 1000 classes). The input is ``input`` with a symbolic batch dimension ``batch``; the
output ``logits``.

    python examples/models/resnet.py --depth 18 -o resnet18.onnx
    python examples/models/resnet.py --depth 18 --check cpu_avx2   # compare with ORT
    python examples/models/resnet.py --depth 18 --check cpu_avx2 --nchw  # NCHW inside
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}_{self.count}"

    def init(self, name: str, a: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(a.astype(np.float32), name))
        return name

    def conv_bn(self, x: str, c_in: int, c_out: int, k: int, stride: int,
                relu: bool) -> str:
        n = self.name("conv")
        fan_in = c_in * k * k
        w = self.rng.standard_normal((c_out, c_in, k, k)) * np.sqrt(2.0 / fan_in)
        self.nodes.append(helper.make_node(
            "Conv", [x, self.init(n + ".weight", w)], [n], name=n, kernel_shape=[k, k],
            strides=[stride, stride], pads=[k // 2] * 4))
        b = n + "_bn"
        params = [self.rng.uniform(0.5, 1.5, c_out), self.rng.standard_normal(c_out) * 0.1,
                  self.rng.standard_normal(c_out) * 0.1, self.rng.uniform(0.5, 1.5, c_out)]
        names = [self.init(f"{b}.{p}", a) for p, a in
                 zip(("weight", "bias", "running_mean", "running_var"), params)]
        self.nodes.append(helper.make_node("BatchNormalization", [n, *names], [b], name=b,
                                           epsilon=1e-5))
        if not relu:
            return b
        r = n + "_relu"
        self.nodes.append(helper.make_node("Relu", [b], [r], name=r))
        return r

    def add_relu(self, a: str, b: str) -> str:
        n = self.name("add")
        self.nodes.append(helper.make_node("Add", [a, b], [n], name=n))
        self.nodes.append(helper.make_node("Relu", [n], [n + "_relu"], name=n + "_relu"))
        return n + "_relu"


def build(depth: int = 18, seed: int = 0, classes: int = 1000) -> onnx.ModelProto:
    """The ResNet of ``depth`` (18 or 50) with weights drawn from ``seed``."""
    if depth not in (18, 50):
        raise ValueError(f"depth must be 18 or 50, got {depth}")
    g = _Builder(seed)
    x = g.conv_bn("input", 3, 64, 7, 2, True)
    g.nodes.append(helper.make_node("MaxPool", [x], ["pool"], name="pool",
                                    kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
    x, c = "pool", 64
    blocks = [2, 2, 2, 2] if depth == 18 else [3, 4, 6, 3]
    expansion = 1 if depth == 18 else 4
    for stage, n_blocks in enumerate(blocks):
        width = 64 * 2 ** stage
        for b in range(n_blocks):
            stride = 2 if stage > 0 and b == 0 else 1
            out_c = width * expansion
            if stride != 1 or c != out_c:
                short = g.conv_bn(x, c, out_c, 1, stride, False)
            else:
                short = x
            if depth == 18:
                y = g.conv_bn(x, c, width, 3, stride, True)
                y = g.conv_bn(y, width, width, 3, 1, False)
            else:
                y = g.conv_bn(x, c, width, 1, 1, True)
                y = g.conv_bn(y, width, width, 3, stride, True)
                y = g.conv_bn(y, width, out_c, 1, 1, False)
            x, c = g.add_relu(y, short), out_c
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"], name="gap"))
    g.nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flat"))
    fc_w = g.init("fc.weight", g.rng.standard_normal((classes, c)) / np.sqrt(c))
    fc_b = g.init("fc.bias", g.rng.standard_normal(classes) * 0.01)
    g.nodes.append(helper.make_node("Gemm", ["flat", fc_w, fc_b], ["logits"], name="fc",
                                    transB=1))
    graph = helper.make_graph(
        g.nodes, f"resnet{depth}",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="stripe examples")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depth", type=int, default=18, choices=(18, 50))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", help="write the model to this .onnx file")
    ap.add_argument("--check", metavar="TARGET",
                    help="import, compile for TARGET and compare with ONNX Runtime")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--nchw", action="store_true",
                    help="import with channels_last=False (the model's NCHW inside)")
    args = ap.parse_args(argv)
    model = build(args.depth, args.seed)
    if args.output:
        onnx.save(model, args.output)
    if args.check:
        import time

        import onnxruntime as ort

        import stripe.onnx

        x = np.random.default_rng(1).standard_normal((args.batch, 3, 224, 224)).astype(
            np.float32)
        t0 = time.perf_counter()
        fn = stripe.onnx.load(model, shapes={"input": x.shape},
                              channels_last=not args.nchw)
        prog = stripe.onnx.compile(fn, args.check)
        t1 = time.perf_counter()
        got = prog.run({"input": x})["logits"]
        t2 = time.perf_counter()
        got = prog.run({"input": x})["logits"]
        t3 = time.perf_counter()
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        want = sess.run(None, {"input": x})[0]
        err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        print(f"import+compile {t1 - t0:.1f} s, first run {t2 - t1:.3f} s, "
              f"second run {t3 - t2:.3f} s, max error / scale {err:.2e}")
        return 0 if err < 1e-3 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
