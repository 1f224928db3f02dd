"""The benchmark suite's own machinery (benchmarks/ is not a package of the library and
its runs are not part of the tests): pinning a run to its CPUs, waiting for other
threads to go quiet before timing, and comparing with a peer round by round."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import run as bench  # noqa: E402


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to pin to 1")
def test_a_one_thread_run_is_pinned_to_one_cpu():
    code = ("import os, sys; sys.path.insert(0, sys.argv[1]); from benchmarks import run; "
            "cpus = run._pin_to_cpus(1); "
            "print(len(cpus), len(os.sched_getaffinity(0)), cpus[0] in os.sched_getaffinity(0))")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT)], capture_output=True,
                         text=True, timeout=60, check=True).stdout.split()
    assert out == ["1", "1", "True"]
    # as many threads as CPUs (or more): nothing to restrict
    code2 = ("import os, sys; sys.path.insert(0, sys.argv[1]); from benchmarks import run; "
             "n = len(os.sched_getaffinity(0)); print(len(run._pin_to_cpus(n)) == n)")
    out2 = subprocess.run([sys.executable, "-c", code2, str(ROOT)], capture_output=True,
                          text=True, timeout=60, check=True).stdout.split()
    assert out2 == ["True"]


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_a_pause_waits_while_another_thread_burns_cpu(monkeypatch):
    # the process's CPU time as /proc reports it, for a process whose other threads keep a
    # whole core busy: the pause waits its whole extra time (a real spinning thread is not
    # used here: on a loaded machine it may get too little CPU to count as busy)
    t_start = time.perf_counter()
    monkeypatch.setattr(bench, "_process_cpu_s", lambda pid: time.perf_counter() - t_start)
    t0 = time.perf_counter()
    bench._pause(0.01, {}, max_extra=0.3)
    busy = time.perf_counter() - t0
    monkeypatch.undo()
    t0 = time.perf_counter()
    bench._pause(0.01, {}, max_extra=2.0)   # the real /proc of this idle process
    quiet = time.perf_counter() - t0
    assert busy >= 0.3          # never quiet: waited the whole extra time
    assert quiet < 1.0          # quiet at once (a few 20 ms steps at most)
    assert bench._process_cpu_s(os.getpid()) > 0.0
    assert bench._process_cpu_s(-1) == 0.0  # no such process
    assert bench._pause(0.0) is None  # no pause asked: returns at once
    assert "waited over 50 ms" in bench._quiet({"pauses": 3, "max": 0.07, "total": 0.1,
                                                 "over_50ms": 1})
    assert bench._quiet(None) == ""


def test_the_fma_peak_is_measured_and_physically_possible():
    """'% peak' divides by the FMA peak measured where the suite runs: one thread of 12
    8-lane FMA chains. Two FMA pipes give at most 32 float32 flops a cycle, so a loop the
    compiler merged or folded away would show as more than 32 flops at 6 GHz; below
    1 GFLOP/s the loop did not run as vector FMAs at all."""
    from benchmarks.peak import FLAGS
    from stripe.codegen.build import missing_cpu_features

    if missing_cpu_features(FLAGS):
        pytest.skip("this CPU lacks AVX2/FMA")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from benchmarks.peak import measure_fma_peak; print(measure_fma_peak(1, 3, 0.02))")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT)], capture_output=True,
                         text=True, timeout=120, check=True, env=env).stdout.split()
    gflops = float(out[-1])
    assert 1.0 < gflops < 32 * 6.0, gflops


def test_paired_ratios_compare_within_rounds():
    # a slow spell that covers rounds 2-4 of stripe and rounds 3-5 of the peer: the medians
    # over all samples differ by the spell, the per-round ratios mostly do not
    stripe = [[1.0, 1.0], [2.0, 2.1], [2.0, 2.0], [2.0, 2.0], [1.0, 1.0]]
    peer = [[1.1, 1.1], [1.1, 1.1], [2.2, 2.2], [2.2, 2.2], [2.2, 2.2]]
    paired = bench._paired(peer, stripe)
    assert paired["rounds"] == [1.1, round(1.1 / 2.05, 4), 1.1, 1.1, 2.2]
    assert paired["ratio"] == pytest.approx(1.1)
    # rounds a system skipped (over its time budget) are left out, not paired with another
    assert bench._paired([[2.0], [], [3.0]], [[1.0], [1.0], [1.0]])["rounds"] == [2.0, 3.0]
    assert bench._paired([[]], [[1.0]]) == {"ratio": None, "rounds": []}


def test_cores_need_enough_timed_wall_time():
    assert bench._cores(0.05, 0.025) == 2.0
    assert bench._cores(0.0003, 0.0002) is None  # 16 calls of a 12 us program: too short
    assert bench._cores(float("nan"), 1.0) is None  # a peer that did not report its CPU time


def test_the_gradient_workloads_are_what_stripe_gradient_writes():
    import numpy as np

    import stripe
    from benchmarks import workloads as wl

    assert stripe.gradient(wl.MATMUL, wrt=["B"], of="O") == wl.MATMUL_WGRAD
    assert stripe.gradient(wl.CONV3X3, wrt=["F"], of="O") == wl.CONV3X3_WGRAD
    rng = np.random.default_rng(0)  # and the numpy references agree with the interpreter
    for src, shapes, ref, out in (
            (wl.MATMUL_WGRAD, {"A": (5, 7), "B": (7, 3), "O_grad": (5, 3)},
             wl.np_matmul_wgrad, "B_grad"),
            (wl.CONV3X3_WGRAD, {"I": (2, 5, 6, 3), "F": (3, 3, 3, 4), "O_grad": (2, 5, 6, 4)},
             wl.np_conv3x3_wgrad, "F_grad")):
        x = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
        got = stripe.interpret(stripe.lower(src, x), x)[out]
        np.testing.assert_allclose(got, ref(**x), rtol=1e-4, atol=1e-4)


def test_onnx_runtime_runs_every_inference_workload_family_as_its_onnx_graph():
    """Each workload family as the small ONNX model ONNX Runtime runs in the suite (the
    per-operation peer), on small shapes: its result, back in the workload's layout, is
    numpy's. The weight gradients have no inference operator."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import numpy as np

    from benchmarks import peer_worker as pw
    from benchmarks import workloads as wl

    tiny = {"matmul_1024": {"A": (5, 7), "B": (7, 3)},
            "bmatmul_16x10x500x64": {"A": (2, 5, 7), "B": (2, 7, 3)},
            "fc_m1": {"A": (1, 9), "B": (9, 4)},
            "gemv_1000x2048": {"W": (6, 9), "X": (9,)},
            "conv_56x56x64": {"I": (1, 6, 5, 3), "F": (3, 3, 3, 4)},
            "conv_stem_7x7s2": {"I": (1, 15, 15, 3), "F": (7, 7, 3, 8)},
            "dwconv_112x112x32": {"I": (1, 6, 6, 8), "F": (3, 3, 8)},
            "gemm_bias_relu_1024": {"A": (5, 7), "B": (7, 3), "Bias": (3,)},
            "softmax_4096x1024": {"I": (4, 9)},
            "layernorm_4096x1024": {"X": (4, 9), "G": (9,), "Bias": (9,)},
            "tanh_chain_16M": {"A": (4, 9), "B": (4, 9), "C": (4, 9)}}
    build = pw.ort_builder()
    for name, w in wl.by_name().items():
        if w.group == "gradient":
            with pytest.raises(NotImplementedError):
                pw.ort_graph(w, w.inputs())
            continue
        prefix = next(k for k in tiny if name.split("_")[0] == k.split("_")[0]
                      and (name.startswith("conv_stem") == k.startswith("conv_stem")))
        small = wl.Workload(name, w.group, w.source, tiny[prefix], w.numpy_fn, 0, "")
        x = small.inputs()
        run = build(small, x)
        got = pw._checked_output(run, run())
        np.testing.assert_allclose(got, w.numpy_fn(**x), rtol=1e-4, atol=1e-5, err_msg=name)


def test_onnx_runtime_runs_in_the_suites_own_venv_when_it_imports_there():
    from benchmarks import peers

    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    assert peers.peer_python("ort") == Path(sys.executable)
    assert peers.peer_python("tvm") == peers.venv_dir() / "bin" / "python"
