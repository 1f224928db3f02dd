"""The example networks (examples/models) compiled for the accelerator example
``npu_example`` (every kernel mapped to its units, host_fallback false), run by the emitted C
and compared with ONNX Runtime. The default profile runs a small BERT layer; the long
profile the four full models (several minutes of compiling)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import stripe.onnx  # noqa: E402
from benchmarks import models as bm  # noqa: E402

LONG = settings._current_profile == "long"  # type: ignore[attr-defined]


def _check(model: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    fn = stripe.onnx.load(str(path), shapes={k: v.shape for k, v in feeds.items()})
    prog = fn.compile("npu_example")
    got = prog.run(feeds)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    for name, ref in want.items():
        scale = max(float(np.abs(ref).max()), 1e-30)
        assert float(np.abs(got[name] - ref).max()) / scale < 1e-3, name
    # the accelerator's own memories carried the data
    stats = prog.stats()
    assert stats["SRAM"]["bytes_in"] > 0 and stats["model"]["cycles"] > 0


def test_small_bert_layer_on_npu_example(tmp_path):
    model = bm.example("bert").build(hidden=64, heads=4, ffn=128)
    rng = np.random.default_rng(0)
    feeds = {"hidden_states": rng.standard_normal((1, 16, 64)).astype(np.float32),
             "attention_mask": np.zeros((1, 1, 1, 16), np.float32)}
    _check(model, feeds, tmp_path)


@pytest.mark.skipif(not LONG, reason="minutes of compiling: the long profile runs it")
@pytest.mark.parametrize("name", list(bm.MODELS))
def test_example_models_on_npu_example(tmp_path, name):
    model = bm.MODELS[name]
    _check(model.build(), bm.model_inputs(model, 1), tmp_path)
