"""A BERT-base encoder layer as an ONNX model built with onnx.helper, seeded random weights.

Nothing is downloaded. The layer as exporters write it (hidden 768, 12 heads, feed-forward
3072 by default): Q, K and V projections (MatMul + Add), reshape to heads and Transpose,
scaled scores (MatMul, Div), an additive attention mask input, Softmax, the context MatMul,
Transpose and Reshape back, the output projection, residual Add and LayerNormalization,
then the feed-forward block with the exact Gelu written with Erf
(``x * 0.5 * (1 + erf(x / sqrt(2)))``), residual Add and LayerNormalization. Inputs:
``hidden_states`` ``(batch, seq, hidden)`` and ``attention_mask`` ``(batch, 1, 1, seq)``
(0 or a large negative number), both with symbolic ``batch`` and ``seq``; output
``output``.

    python examples/models/bert.py -o bert_layer.onnx
    python examples/models/bert.py --check cpu_avx2 --seq 128    # compare with ONNX Runtime
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(hidden: int = 768, heads: int = 12, ffn: int = 3072,
          seed: int = 0) -> onnx.ModelProto:
    """One encoder layer with weights drawn from ``seed``."""
    if hidden % heads:
        raise ValueError(f"heads ({heads}) must divide hidden ({hidden})")
    rng = np.random.default_rng(seed)
    head = hidden // heads
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def init(name: str, a: np.ndarray, dtype: type = np.float32) -> str:
        inits.append(numpy_helper.from_array(np.asarray(a).astype(dtype), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs: object) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def dense(x: str, n_in: int, n_out: int, name: str) -> str:
        w = init(f"{name}.weight", rng.standard_normal((n_in, n_out)) / np.sqrt(n_in))
        b = init(f"{name}.bias", rng.standard_normal(n_out) * 0.02)
        return node("Add", [node("MatMul", [x, w], f"/{name}/MatMul"), b], f"/{name}/Add")

    def layer_norm(x: str, name: str) -> str:
        g = init(f"{name}.weight", rng.uniform(0.8, 1.2, hidden))
        b = init(f"{name}.bias", rng.standard_normal(hidden) * 0.02)
        return node("LayerNormalization", [x, g, b], f"/{name}/LayerNorm", axis=-1,
                    epsilon=1e-12)

    init("heads_shape", np.array([0, 0, heads, head]), np.int64)
    init("merge_shape", np.array([0, 0, hidden]), np.int64)
    init("scale", np.array(np.sqrt(head)))
    init("sqrt2", np.array(np.sqrt(2.0)))
    init("one", np.array(1.0))
    init("half", np.array(0.5))

    x = "hidden_states"
    q, k, v = (dense(x, hidden, hidden, f"attention.self.{n}") for n in ("query", "key",
                                                                         "value"))
    qh = node("Transpose", [node("Reshape", [q, "heads_shape"], "/q/Reshape")],
              "/q/Transpose", perm=[0, 2, 1, 3])
    kh = node("Transpose", [node("Reshape", [k, "heads_shape"], "/k/Reshape")],
              "/k/Transpose", perm=[0, 2, 3, 1])
    vh = node("Transpose", [node("Reshape", [v, "heads_shape"], "/v/Reshape")],
              "/v/Transpose", perm=[0, 2, 1, 3])
    scores = node("Div", [node("MatMul", [qh, kh], "/scores/MatMul"), "scale"], "/scores/Div")
    scores = node("Add", [scores, "attention_mask"], "/scores/Add")
    probs = node("Softmax", [scores], "/probs/Softmax", axis=-1)
    ctx = node("MatMul", [probs, vh], "/context/MatMul")
    ctx = node("Transpose", [ctx], "/context/Transpose", perm=[0, 2, 1, 3])
    ctx = node("Reshape", [ctx, "merge_shape"], "/context/Reshape")
    att = dense(ctx, hidden, hidden, "attention.output.dense")
    att = layer_norm(node("Add", [att, x], "/attention/residual"), "attention.output")
    h = dense(att, hidden, ffn, "intermediate.dense")
    erf = node("Erf", [node("Div", [h, "sqrt2"], "/gelu/Div")], "/gelu/Erf")
    gelu = node("Mul", [node("Mul", [h, node("Add", [erf, "one"], "/gelu/Add")], "/gelu/Mul"),
                        "half"], "/gelu/Mul_1")
    out = dense(gelu, ffn, hidden, "output.dense")
    out = layer_norm(node("Add", [out, att], "/output/residual"), "output")
    nodes.append(helper.make_node("Identity", [out], ["output"], name="output"))
    graph = helper.make_graph(
        nodes, "bert_layer",
        [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT,
                                       ["batch", "seq", hidden]),
         helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT,
                                       ["batch", 1, 1, "seq"])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", "seq", hidden])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="stripe examples")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("-o", "--output", help="write the model to this .onnx file")
    ap.add_argument("--check", metavar="TARGET",
                    help="import, compile for TARGET and compare with ONNX Runtime")
    args = ap.parse_args(argv)
    model = build(seed=args.seed)
    if args.output:
        onnx.save(model, args.output)
    if args.check:
        import time

        import onnxruntime as ort

        import stripe.onnx

        r = np.random.default_rng(1)
        feeds = {"hidden_states": r.standard_normal((args.batch, args.seq, 768)).astype(
                     np.float32),
                 "attention_mask": np.where(r.random((args.batch, 1, 1, args.seq)) < 0.1,
                                            -10000.0, 0.0).astype(np.float32)}
        t0 = time.perf_counter()
        fn = stripe.onnx.load(model, shapes={k: v.shape for k, v in feeds.items()})
        prog = stripe.onnx.compile(fn, args.check)
        t1 = time.perf_counter()
        got = prog.run(feeds)["output"]
        t2 = time.perf_counter()
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)[0]
        err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        print(f"import+compile {t1 - t0:.1f} s, run {t2 - t1:.3f} s, max error / scale "
              f"{err:.2e}")
        return 0 if err < 1e-3 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
