"""Whole models: stripe against ONNX Runtime and PyTorch on ResNet-18, ResNet-50, MobileNetV2
and a BERT-base encoder layer.

    python -m benchmarks.models           # every model, batch 1 and 8, 1 and 2 threads
    python -m benchmarks.models --models resnet18 --batches 1 --threads 1 --repeat 5
    python -m benchmarks.models --out results.json --plot docs/img/models.png
    python -m benchmarks.models --layers resnet18 --threads 1    # each conv/fc layer alone

The models are built by ``examples/models/*.py`` (onnx.helper, seeded random weights, nothing
downloaded) and written once per run to a temporary directory. Per thread count T, a worker
process pinned to T CPUs (``OMP_NUM_THREADS=T``) does, for each (model, batch):

1. ONNX Runtime (the default CPU provider, ``intra_op_num_threads=T``, one inter-op thread,
   every graph optimisation) runs the model once on seeded inputs: the reference;
2. stripe imports the model (``stripe.onnx.load``) and compiles it for ``host`` (the best
   shipped CPU config for this CPU, ``units`` = T); the compile goes through stripe's
   cache, so a second run does not compile again. Its outputs must match the reference:
   ``max|stripe - ORT| / max|ORT| < 1e-3``;
3. PyTorch (CPU, T threads), where the peers venv has torch, onnx and onnx2torch, runs the
   same ONNX model converted by onnx2torch (the same weights, torch.nn layers, eval mode),
   checked the same way;
4. ``--repeat`` rounds, each a batch of ``--calls`` calls of every system after the same
   pause and untimed warm-up, the systems taking turns going first (ONNX Runtime and
   PyTorch run in their own processes, `benchmarks.peers.PeerServer`). The table gives
   each system's median time and ``ORT time / system time`` (above 1: faster than ONNX
   Runtime), as the ratio of the medians and as the median of the per-round ratios
   (``paired``).

``--layers resnet18`` times each distinct convolution (and the classifier) of ResNet-18
alone: the layer as stripe compiles it inside the model (NHWC, batch norm folded into the
kernel and bias, + ReLU) against ONNX Runtime running the same layer as a one-node model
(Conv + Relu, NCHW, the same folded weights); and, from ONNX Runtime's own profiler, the
time of each of its kernels inside the whole model.

Output: the tables on standard output, ``--out`` (JSON, every sample) and ``--plot`` (PNG or
SVG; needs matplotlib, an optional dependency of the suite).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):            # `python benchmarks/models.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "benchmarks"

import numpy as np  # noqa: E402

from benchmarks import peers as _peers  # noqa: E402
from benchmarks.peer_worker import relative_error  # noqa: E402
from benchmarks.run import _cores, _machine, _paired, _pause, _pin_to_cpus  # noqa: E402
from benchmarks.timing import warm  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOLERANCE = 1e-3
"""Largest accepted ``max|out - ref| / max|ref|`` against ONNX Runtime (float32)."""

SYSTEMS = ("stripe", "ort", "torch")
PEERS = ("ort", "torch")


def example(name: str):  # type: ignore[no-untyped-def]
    """The module ``examples/models/<name>.py`` (the examples are scripts, not a package)."""
    path = ROOT / "examples" / "models" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"stripe_example_{name}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _image(batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"input": rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)}


def _bert_inputs(batch: int, rng: np.random.Generator, seq: int = 128,
                 hidden: int = 768) -> dict[str, np.ndarray]:
    # the last eighth of each sequence is padding, masked out with a large negative number
    mask = np.zeros((batch, 1, 1, seq), np.float32)
    mask[..., seq - seq // 8:] = -10000.0
    return {"hidden_states": rng.standard_normal((batch, seq, hidden)).astype(np.float32),
            "attention_mask": mask}


@dataclass(frozen=True)
class Model:
    """A benchmark model: how to build its ONNX graph and its inputs for a batch size."""
    name: str
    title: str
    build: Callable[[], object]
    inputs: Callable[[int, np.random.Generator], dict[str, np.ndarray]]


MODELS: dict[str, Model] = {
    "resnet18": Model("resnet18", "ResNet-18", lambda: example("resnet").build(18), _image),
    "resnet50": Model("resnet50", "ResNet-50", lambda: example("resnet").build(50), _image),
    "mobilenetv2": Model("mobilenetv2", "MobileNetV2", lambda: example("mobilenet").build(),
                         _image),
    "bert": Model("bert", "BERT-base layer (seq 128)", lambda: example("bert").build(),
                  _bert_inputs),
}


def model_inputs(model: Model, batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The seeded inputs of ``model`` at ``batch``: the same arrays in every process."""
    return model.inputs(batch, np.random.default_rng(seed))


def _case(name: str, batch: int) -> str:
    return f"{name}_b{batch}"


# --------------------------------------------------------------------------- the worker

def compile_stripe(path: str, feeds: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
    """The model at ``path`` imported with ``feeds``' shapes and compiled for ``host``:
    ``(program, seconds)``."""
    import stripe
    import stripe.onnx

    t0 = time.perf_counter()
    fn = stripe.onnx.load(path, shapes={k: v.shape for k, v in feeds.items()})
    prog = stripe.compile(fn, target="host")
    return prog, time.perf_counter() - t0


def _host_name() -> str:
    from stripe import host

    cfg = host.host_config()
    return f"host = {Path(str(cfg.extends[0])).stem}, units {cfg.compute.units}"


def time_in_turns(fns: dict[str, Callable[[], object]], servers: dict, keys: dict[str, str],
                  rounds: int, calls: int, settle: float, warm_s: float) -> dict[str, list]:
    """``rounds`` rounds; in each, every system (a local callable, or a peer server's
    prepared ``keys[peer]``) runs a batch of ``calls`` timed calls after a pause (``settle``
    seconds, then until no other thread is busy) and ``warm_s`` seconds of untimed calls,
    the systems taking turns going first. Returns ``{system: [[seconds per call] per
    round]}`` and ``{system: CPU seconds}`` under the key ``"_cpu"``."""
    systems = list(fns) + [p for p in servers if p in keys]
    by_round: dict[str, list[list[float]]] = {s: [] for s in systems}
    cpu: dict[str, float] = dict.fromkeys(systems, 0.0)
    for r in range(rounds):
        k = r % len(systems)
        for s in systems[k:] + systems[:k]:
            _pause(settle, servers)
            if s in fns:
                warm(fns[s], warm_s)
                c0 = time.process_time()
                mine = []
                for _ in range(calls):
                    t0 = time.perf_counter()
                    fns[s]()
                    mine.append(time.perf_counter() - t0)
                cpu[s] += time.process_time() - c0
            else:
                rep = servers[s].request({"cmd": "time", "key": keys[s], "n": calls,
                                          "warm_s": warm_s})
                if rep is None:
                    mine = []
                else:
                    mine = rep["samples_s"]
                    cpu[s] += rep.get("cpu_s", float("nan"))
            by_round[s].append(mine)
    return {**by_round, "_cpu": cpu}  # type: ignore[dict-item]


def _summary(rounds: list[list[float]], cpu_s: float) -> dict:
    xs = [x for r in rounds for x in r]
    if not xs:
        return {}
    return {"median_s": statistics.median(xs), "min_s": min(xs), "samples_s": xs,
            "rounds_s": rounds, "cpu_per_wall": _cores(cpu_s, sum(xs))}


def worker(args: argparse.Namespace) -> dict:
    """One thread count: check and time every (model, batch); see the module docstring."""
    from stripe import arrays as stripe_arrays

    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    cpus = _pin_to_cpus(threads)
    settle = args.settle if threads > 1 else 0.0
    env = dict(os.environ, PYTHONPATH=str(ROOT), STRIPE_PEER_THREADS=str(threads))
    servers = {p: _peers.PeerServer(p, env, str(ROOT), args.peer_timeout)
               for p in args.peers.split(",") if p}
    res: dict = {"threads": threads, "cpus": cpus, "host": _host_name(),
                 "loadavg_before": os.getloadavg(), "peers": {}, "cases": {}}
    for p, srv in list(servers.items()):
        hello = srv.hello or {}
        res["peers"][p] = hello.get("info") or {"error": hello.get("error", "did not start")}
        if "error" in hello or not srv.alive:
            print(f"  [{p}] not measured: {hello.get('error')}", flush=True)
            srv.close()
            del servers[p]
    if "ort" not in servers:
        raise SystemExit("ONNX Runtime is needed for the reference (pip install onnxruntime)")
    work = Path(args.dir)
    for case in args.cases.split(","):
        name, batch = case.rsplit("_b", 1)
        path = str(work / f"{name}.onnx")
        feeds = model_inputs(MODELS[name], int(batch))
        x_npz, ref_npz = str(work / f"{case}_in.npz"), str(work / f"{case}_ref_{threads}.npz")
        np.savez(x_npz, **feeds)
        entry: dict = {"model": name, "batch": int(batch)}
        rep = servers["ort"].request({"cmd": "prepare_model", "key": case, "path": path,
                                      "inputs": x_npz, "save": ref_npz})
        if rep is None or not rep.get("check", "").startswith("reference"):
            entry["ort"] = {"check": f"FAILED {rep and rep.get('check')}"}
            res["cases"][case] = entry
            servers["ort"].restart()
            continue
        entry["ort"] = {"check": "reference", "load_s": rep["compile_s"]}
        with np.load(ref_npz) as z:
            ref = {k: z[k] for k in z.files}
        fns: dict[str, Callable[[], object]] = {}
        try:
            prog, compile_s = compile_stripe(path, feeds)
            err = relative_error(prog.run(feeds), ref)
            ok = err < TOLERANCE
            entry["stripe"] = {"check": ("ok" if ok else "FAILED") + f" relative error {err:.3g}",
                               "err": err, "compile_s": compile_s}
            if ok:
                mine = {k: stripe_arrays.aligned(v) for k, v in feeds.items()}
                fns["stripe"] = lambda prog=prog, mine=mine: prog.run(mine)
        except Exception as e:  # noqa: BLE001 - report and go on
            entry["stripe"] = {"check": f"FAILED {type(e).__name__}: {str(e)[:300]}"}
        keys = {"ort": case}
        for p, srv in servers.items():
            if p == "ort":
                continue
            rep = srv.request({"cmd": "prepare_model", "key": case, "path": path,
                               "inputs": x_npz, "ref": ref_npz, "tol": TOLERANCE})
            if rep is None:
                entry[p] = {"check": "FAILED: peer process died or timed out"}
                srv.restart()
                continue
            entry[p] = {"check": rep["check"], "load_s": rep.get("compile_s")}
            if rep["check"].startswith("ok"):
                keys[p] = case
        print(f"  [{threads}T] {case}: " + ", ".join(f"{s} {entry[s]['check']}"
                                                    for s in SYSTEMS if s in entry), flush=True)
        timed = time_in_turns(fns, servers, keys, args.repeat, args.calls, settle, args.warm_s)
        cpu = timed.pop("_cpu")
        for s, rounds in timed.items():
            entry[s].update(_summary(rounds, cpu[s]))  # type: ignore[arg-type]
            if s != "ort" and "median_s" in entry[s]:
                entry[s]["paired_vs_ort"] = _paired(timed["ort"], rounds)  # ORT / system
        res["cases"][case] = entry
        print(f"  [{threads}T] {case}: " + ", ".join(
            f"{s} {entry[s]['median_s'] * 1e3:.2f} ms" for s in SYSTEMS
            if "median_s" in entry.get(s, {})), flush=True)
        os.unlink(ref_npz)
    for srv in servers.values():
        srv.close()
    res["loadavg_after"] = os.getloadavg()
    return res


# --------------------------------------------------------------------------- layers

@dataclass(frozen=True)
class Layer:
    """One convolution of a model with its batch norm folded in (``kernel`` OIHW, ``bias``),
    as stripe's importer folds it; ``count`` = how many layers of the model have this
    shape. ``depthwise``: one group per channel (``kernel`` is ``(C, 1, K, K)``)."""
    name: str
    kernel: np.ndarray
    bias: np.ndarray
    stride: int
    pad: int
    size: int                # input height = width
    count: int
    depthwise: bool = False

    @property
    def channels(self) -> tuple[int, int]:
        """(input channels, output channels)."""
        co, ci = self.kernel.shape[:2]
        return (co if self.depthwise else ci), co

    @property
    def out_size(self) -> int:
        k = self.kernel.shape[2]
        return (self.size + 2 * self.pad - k) // self.stride + 1

    @property
    def flops(self) -> int:
        """Multiply-adds x 2 of one image."""
        co, ci_g, k, _ = self.kernel.shape
        return 2 * self.out_size ** 2 * co * ci_g * k * k


def conv_layers(model: object) -> list[Layer]:
    """The distinct Conv + BatchNormalization layers of ``model`` (an ``onnx.ModelProto``
    of a ResNet or MobileNet as examples/models builds them: fixed image sizes), the batch norm
    folded into the kernel and bias (float64, then float32), in graph order, one per
    shape (input size, channels, kernel, stride, dense or depthwise), with the number of
    layers of that shape. Grouped convolutions other than depthwise ones are left out."""
    from onnx import numpy_helper, shape_inference

    inferred = shape_inference.infer_shapes(model)  # type: ignore[arg-type]
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
              for vi in inferred.graph.value_info}
    for vi in model.graph.input:  # type: ignore[attr-defined]
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}  # type: ignore
    consumers: dict[str, list] = {}
    for node in model.graph.node:  # type: ignore[attr-defined]
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    seen: dict[tuple, int] = {}
    layers: list[Layer] = []
    for node in model.graph.node:  # type: ignore[attr-defined]
        if node.op_type != "Conv":
            continue
        attrs = {a.name: a for a in node.attribute}
        w = inits[node.input[1]].astype(np.float64)
        group = attrs["group"].i if "group" in attrs else 1
        if group != 1 and not (group == w.shape[0] and w.shape[1] == 1):
            continue
        bn = consumers.get(node.output[0], [None])[0]
        if bn is None or bn.op_type != "BatchNormalization":
            continue
        gamma, beta, mean, var = (inits[n].astype(np.float64) for n in bn.input[1:5])
        eps = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
        scale = gamma / np.sqrt(var + eps)
        kernel = (w * scale[:, None, None, None]).astype(np.float32)
        bias = (beta - mean * scale).astype(np.float32)
        stride = attrs["strides"].ints[0] if "strides" in attrs else 1
        pad = attrs["pads"].ints[0] if "pads" in attrs else 0
        size = shapes[node.input[0]][2]
        key = (size, *kernel.shape, stride, group)
        if key in seen:
            old = layers[seen[key]]
            layers[seen[key]] = Layer(old.name, old.kernel, old.bias, old.stride, old.pad,
                                      old.size, old.count + 1, old.depthwise)
            continue
        seen[key] = len(layers)
        layers.append(Layer(node.name, kernel, bias, stride, pad, size, 1, group > 1))
    return layers


def layer_label(layer: Layer) -> str:
    """``3x3/2 64->128 @56->28`` (``dw`` for a depthwise one)."""
    k = layer.kernel.shape[2]
    ci, co = layer.channels
    s = f"/{layer.stride}" if layer.stride > 1 else ""
    dw = " dw" if layer.depthwise else ""
    return f"{k}x{k}{s}{dw} {ci}->{co} @{layer.size}->{layer.out_size}"


def layer_tile(layer: Layer, batch: int) -> tuple[str, dict]:
    """The layer as stripe's importer writes it inside the model: an NHWC convolution with
    the HWIO kernel (``(K, K, C)`` for a depthwise one), then ``max(conv + bias, 0)``.
    ``(source, input types)``; :func:`layer_inputs` makes the arrays."""
    k = layer.kernel.shape[2]
    ci, co = layer.channels
    s, p, n, out = layer.stride, layer.pad, layer.size, layer.out_size
    ix = f"{s} * x + i - {p}" if s > 1 else f"x + i - {p}"
    iy = f"{s} * y + j - {p}" if s > 1 else f"y + j - {p}"
    if layer.depthwise:
        f_shape: tuple[int, ...] = (k, k, co)
        body = f"+(I[b, {ix}, {iy}, co] * F[i, j, co])"
    else:
        f_shape = (k, k, ci, co)
        body = f"+(I[b, {ix}, {iy}, ci] * F[i, j, ci, co])"
    f_decl = ", ".join(map(str, f_shape))
    src = (f"function (I[{batch}, {n}, {n}, {ci}], F[{f_decl}], B[{co}]) -> (O) {{\n"
           f"    C[b, x, y, co : {batch}, {out}, {out}, {co}] = {body};\n"
           f"    O = max(C + B, 0.0);\n}}\n")
    types = {"I": ((batch, n, n, ci), "float32"), "F": (f_shape, "float32"),
             "B": ((co,), "float32")}
    return src, types


def layer_inputs(layer: Layer, x: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays of :func:`layer_tile`'s program for the NCHW input ``x``: ``x`` as NHWC,
    the kernel as HWIO (``(K, K, C)`` for a depthwise one), the bias."""
    kern = layer.kernel[:, 0].transpose(1, 2, 0) if layer.depthwise else \
        layer.kernel.transpose(2, 3, 1, 0)
    return {"I": np.ascontiguousarray(x.transpose(0, 2, 3, 1)),
            "F": np.ascontiguousarray(kern), "B": layer.bias}


def layer_onnx(layer: Layer, batch: int):  # type: ignore[no-untyped-def]
    """The layer as a one-node ONNX model for ONNX Runtime: Conv (NCHW, the folded kernel
    and bias as initializers; ``group`` = channels for a depthwise one) + Relu; input
    ``x``, output ``y``."""
    from onnx import TensorProto, helper, numpy_helper

    k = layer.kernel.shape[2]
    ci, co = layer.channels
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k],
                              strides=[layer.stride] * 2, pads=[layer.pad] * 4,
                              group=co if layer.depthwise else 1),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(
        nodes, "layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                       [batch, ci, layer.size, layer.size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(layer.kernel, "w"), numpy_helper.from_array(layer.bias, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def ort_profile(path: str, feeds: dict[str, np.ndarray], threads: int,
                runs: int = 5) -> dict[str, float]:
    """ONNX Runtime's own profile of the model at ``path``: ``{"node (op)": mean ms per
    run}`` over ``runs`` runs after one warm-up, for every node of its optimised graph
    (fused convolutions keep the Conv's name; ``ReorderInput``/``ReorderOutput`` nodes
    are its changes to and from the NCHWc layout)."""
    from benchmarks.peer_worker import ort_session

    prefix = str(Path(tempfile.gettempdir()) / f"stripe_ort_profile_{os.getpid()}")
    sess = ort_session(path, threads, profile=prefix)
    for _ in range(runs + 1):
        sess.run(None, feeds)
    prof = Path(sess.end_profiling())
    events = json.loads(prof.read_text())
    prof.unlink()
    per: dict[str, list[float]] = {}
    for ev in events:
        if ev.get("cat") != "Node" or not ev.get("name", "").endswith("_kernel_time"):
            continue
        key = f"{ev['name'].removesuffix('_kernel_time')} ({ev.get('args', {}).get('op_name')})"
        per.setdefault(key, []).append(ev["dur"] / 1e3)
    return {k: statistics.fmean(xs[1:]) for k, xs in per.items() if len(xs) > 1}


def layers_worker(args: argparse.Namespace) -> dict:
    """Each distinct layer of ``--layers`` alone, stripe against ONNX Runtime (see the
    module docstring), and ONNX Runtime's profile of the whole model."""
    import onnx

    import stripe

    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    cpus = _pin_to_cpus(threads)
    settle = args.settle if threads > 1 else 0.0
    env = dict(os.environ, PYTHONPATH=str(ROOT), STRIPE_PEER_THREADS=str(threads))
    server = _peers.PeerServer("ort", env, str(ROOT), args.peer_timeout)
    if not server.alive:
        raise SystemExit(f"ONNX Runtime did not start: {server.hello}")
    work = Path(args.dir)
    name = args.layers
    batch = int(args.batches.split(",")[0])
    model = onnx.load(str(work / f"{name}.onnx"))
    res: dict = {"threads": threads, "cpus": cpus, "host": _host_name(), "model": name,
                 "batch": batch, "loadavg_before": os.getloadavg(), "layers": []}
    rng = np.random.default_rng(0)
    for layer in conv_layers(model):
        ci, co = layer.channels
        x = rng.standard_normal((batch, ci, layer.size, layer.size)).astype(np.float32)
        lpath, x_npz = str(work / f"layer_{layer.name}.onnx"), str(work / "layer_in.npz")
        ref_npz = str(work / "layer_ref.npz")
        onnx.save(layer_onnx(layer, batch), lpath)
        np.savez(x_npz, x=x)
        rep = server.request({"cmd": "prepare_model", "key": layer.name, "path": lpath,
                              "inputs": x_npz, "save": ref_npz})
        with np.load(ref_npz) as z:
            ref = z["y"]
        src, types = layer_tile(layer, batch)
        t0 = time.perf_counter()
        prog = stripe.compile(src, types, target="host")
        compile_s = time.perf_counter() - t0
        ins = {k2: stripe.arrays.aligned(v) for k2, v in layer_inputs(layer, x).items()}
        outs = {k2: stripe.arrays.aligned(np.empty_like(v)) for k2, v in prog(**ins).items()}
        got = prog.run(ins, out=outs)["O"].transpose(0, 3, 1, 2)
        err = relative_error({"y": got}, {"y": ref})
        fns = {"stripe": lambda prog=prog, ins=ins, outs=outs: prog.run(ins, out=outs)}
        timed = time_in_turns(fns, {"ort": server}, {"ort": layer.name}, args.repeat,
                              args.calls, settle, args.warm_s)
        cpu = timed.pop("_cpu")
        s, o = _summary(timed["stripe"], cpu["stripe"]), _summary(timed["ort"], cpu["ort"])
        flops = batch * layer.flops
        row = {"layer": layer.name, "label": layer_label(layer), "count": layer.count,
               "flops": flops, "err": err, "stripe_compile_s": compile_s,
               "ort_check": rep and rep.get("check"),
               "stripe_ms": s.get("median_s", float("nan")) * 1e3,
               "ort_ms": o.get("median_s", float("nan")) * 1e3,
               "paired": _paired(timed["ort"], timed["stripe"])}
        res["layers"].append(row)
        print(f"  [{threads}T] {row['label']} x{layer.count}: stripe {row['stripe_ms']:.3f} ms, "
              f"ORT {row['ort_ms']:.3f} ms, err {err:.2g}", flush=True)
    server.close()
    feeds = model_inputs(MODELS[name], batch)
    res["ort_profile_ms"] = ort_profile(str(work / f"{name}.onnx"), feeds, threads)
    res["loadavg_after"] = os.getloadavg()
    return res


# --------------------------------------------------------------------------- the driver

def _run_worker(mode: str, args: argparse.Namespace, threads: int, extra: list[str]) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [sys.executable, "-m", "benchmarks.models", "--worker", mode, "--worker-out", out,
           "--dir", args.dir, "--repeat", str(args.repeat), "--calls", str(args.calls),
           "--settle", str(args.settle), "--warm-s", str(args.warm_s), "--peers", args.peers,
           "--peer-timeout", str(args.peer_timeout), "--batches", args.batches, *extra]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(cmd, env=env, cwd=str(ROOT))
    try:
        if r.returncode != 0:
            raise SystemExit(f"benchmark worker ({threads} threads) failed with exit code "
                             f"{r.returncode}")
        return json.loads(Path(out).read_text())
    finally:
        os.unlink(out)


def _ratio(entry: dict, s: str) -> tuple[str, str]:
    e, o = entry.get(s, {}), entry.get("ort", {})
    if "median_s" not in e or "median_s" not in o:
        return "-", "-"
    paired = (e.get("paired_vs_ort") or {}).get("ratio")
    return f"{o['median_s'] / e['median_s']:.2f}", f"{paired:.2f}" if paired else "-"


def markdown(res: dict) -> str:
    """The latency table (and the layer table of a ``--layers`` run)."""
    lines = []
    for run in res["runs"]:
        t = run["threads"]
        lines += [f"### {t} thread{'s' if t > 1 else ''}", "",
                  f"stripe: `{run.get('host')}`; load average before/after: "
                  f"{run['loadavg_before'][0]:.2f} / {run['loadavg_after'][0]:.2f}", ""]
        if "layers" in run:
            lines += ["| layer (batch norm folded, + ReLU) | count | stripe ms | ORT ms | "
                      "ORT / stripe (paired) | stripe GFLOP/s |",
                      "|---|---:|---:|---:|---:|---:|"]
            for r in run["layers"]:
                p = r["paired"].get("ratio")
                lines.append(f"| {r['label']} | {r['count']} | {r['stripe_ms']:.3f} | "
                             f"{r['ort_ms']:.3f} | {p:.2f} | "
                             f"{r['flops'] / r['stripe_ms'] / 1e6:.1f} |" if p else
                             f"| {r['label']} | {r['count']} | - | - | - | - |")
            lines.append("")
            continue
        lines += ["| model | batch | stripe ms | ORT ms | torch ms | ORT / stripe | "
                  "(paired) | ORT / torch | stripe check | torch check |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
        for entry in run["cases"].values():
            def ms(s: str, entry: dict = entry) -> str:
                e = entry.get(s, {})
                return f"{e['median_s'] * 1e3:.2f}" if "median_s" in e else "-"
            st, sp = _ratio(entry, "stripe")
            tt, _ = _ratio(entry, "torch")
            lines.append(
                f"| {MODELS[entry['model']].title} | {entry['batch']} | {ms('stripe')} | "
                f"{ms('ort')} | {ms('torch')} | {st} | {sp} | {tt} | "
                f"{entry.get('stripe', {}).get('check', '-')} | "
                f"{entry.get('torch', {}).get('check', '-')} |")
        lines.append("")
    return "\n".join(lines)


SHORT = {"resnet18": "ResNet-18", "resnet50": "ResNet-50", "mobilenetv2": "MobileNetV2",
         "bert": "BERT layer"}
"""Model names on the plot's axis."""


def plot(res: dict, path: Path) -> str:
    """Speed relative to ONNX Runtime (ORT time / system time; 1 = as fast as ORT), one
    panel per thread count, a group of bars per (model, batch). The file type follows
    ``path``'s suffix (.png or .svg)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "not written: matplotlib is not importable (pip install matplotlib)"
    runs = [r for r in res["runs"] if "cases" in r]
    if not runs:
        return "not written: no model runs"
    counts = [len(r["cases"]) for r in runs]
    fig, axes = plt.subplots(1, len(runs), figsize=(0.85 * sum(counts) + 1.4, 3.4),
                             squeeze=False, sharey=True, gridspec_kw={"width_ratios": counts})
    for ax, run in zip(axes[0], runs):
        cases = list(run["cases"].values())
        labels = [f"{SHORT.get(c['model'], c['model'])}\nb{c['batch']}" for c in cases]
        for i, (s, colour) in enumerate((("stripe", "tab:blue"), ("torch", "tab:orange"))):
            vals = []
            for c in cases:
                e, o = c.get(s, {}), c.get("ort", {})
                vals.append(o["median_s"] / e["median_s"]
                            if "median_s" in e and "median_s" in o else 0.0)
            ax.bar([j + (i - 0.5) * 0.38 for j in range(len(cases))], vals, 0.38,
                   label=s if s != "torch" else "PyTorch", color=colour)
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_title(f"{run['threads']} thread{'s' if run['threads'] > 1 else ''}", fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
    axes[0][0].set_ylabel("ORT time / time (above 1: faster)", fontsize=8)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80, metadata={"Software": None} if path.suffix == ".png" else
                {"Date": None})
    plt.close(fig)
    return str(path)


def _revision() -> str:
    """The checkout's commit, ``+changes`` when its working tree differs from it (the
    compiler measured is the working tree's), or ``?`` outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=str(ROOT),
                              capture_output=True, text=True, timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=str(ROOT), capture_output=True, text=True,
                               timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return (head or "?") + ("+changes" if dirty else "")


def _csv(text: str, what: str, valid: tuple[str, ...] | None = None) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if valid is not None:
        bad = [t for t in items if t not in valid]
        if bad:
            raise SystemExit(f"{what}: unknown {bad}; valid: {', '.join(valid)}")
    return items


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.models", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"comma-separated (default all: {','.join(MODELS)})")
    ap.add_argument("--batches", default="1,8", help="batch sizes (default 1,8)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="rounds of turns per (model, batch) (default 5)")
    ap.add_argument("--calls", type=int, default=3,
                    help="timed calls of each system per round (default 3)")
    ap.add_argument("--settle", type=float, default=0.25,
                    help="seconds of pause before each batch of calls with 2+ threads")
    ap.add_argument("--warm-s", type=float, default=0.2,
                    help="untimed calls for this long (at least one) before each batch")
    ap.add_argument("--peers", default="ort,torch",
                    help="ort (needed: the reference) and torch (when its venv has it)")
    ap.add_argument("--peer-timeout", type=float, default=1800.0)
    ap.add_argument("--layers", default="",
                    help="time each distinct convolution of this model alone instead "
                         "(resnet18, resnet50, mobilenetv2; the first of --batches)")
    ap.add_argument("--out", default="", help="write every result to this JSON file")
    ap.add_argument("--plot", default="", help="write the plot here (.png or .svg)")
    ap.add_argument("--worker", choices=["models", "layers"], help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    ap.add_argument("--dir", default="", help=argparse.SUPPRESS)
    ap.add_argument("--cases", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        res = worker(args) if args.worker == "models" else layers_worker(args)
        Path(args.worker_out).write_text(json.dumps(res))
        return 0

    models = _csv(args.models, "--models", tuple(MODELS))
    if args.layers:
        models = _csv(args.layers, "--layers", ("resnet18", "resnet50", "mobilenetv2"))
    try:
        batches = [int(b) for b in _csv(args.batches, "--batches")]
        threads = [int(t) for t in _csv(args.threads, "--threads")]
    except ValueError as e:
        raise SystemExit(f"--batches and --threads take comma-separated integers: {e}") from None
    if any(b < 1 for b in batches) or any(t < 1 for t in threads) or args.repeat < 1 \
            or args.calls < 1:
        raise SystemExit("--batches, --threads, --repeat and --calls must be positive")
    found = _peers.detect(tuple(_csv(args.peers, "--peers", PEERS)))
    for info in found.values():
        print(info["message"], flush=True)
    if found.get("ort", {}).get("status") != "present":
        raise SystemExit("ONNX Runtime is needed: it computes the reference")
    args.peers = ",".join(p for p, i in found.items() if i["status"] == "present")
    started = time.time()
    res: dict = {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                 "machine": _machine(), "argv": sys.argv[1:] if argv is None else argv,
                 "revision": _revision(),
                 "peers": found, "tolerance": TOLERANCE, "runs": []}
    with tempfile.TemporaryDirectory(prefix="stripe-bench-models-") as work:
        args.dir = work
        import onnx

        for name in models:
            onnx.save(MODELS[name].build(), str(Path(work) / f"{name}.onnx"))
        for t in threads:
            print(f"{t} thread(s):", flush=True)
            if args.layers:
                res["runs"].append(_run_worker("layers", args, t, ["--layers", models[0]]))
            else:
                cases = [_case(m, b) for b in batches for m in models]
                res["runs"].append(_run_worker("models", args, t, ["--cases", ",".join(cases)]))
    res["wall_s"] = time.time() - started
    if args.plot and not args.layers:
        res["plot"] = plot(res, Path(args.plot))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    print(markdown(res))
    print(f"{res['wall_s']:.0f} s" + (f"; plot: {res['plot']}" if "plot" in res else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
