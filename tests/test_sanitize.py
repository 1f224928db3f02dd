"""Emitted C under AddressSanitizer: the optimised programs stay inside their buffers.

``STRIPE_SANITIZE=address`` builds every program with ``-fsanitize=address``. Python is not
instrumented, so each check runs in a subprocess that preloads gcc's ASan runtime (and
libstdc++, whose exceptions islpy throws). A control program that writes one element past a
``malloc``-ed buffer must be reported, or the harness proves nothing. Skipped where gcc has
no ASan runtime.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stripe.codegen.build import SANITIZERS, sanitizer_flags
from stripe.errors import StripeError

ROOT = Path(__file__).resolve().parent.parent


def _runtime(name: str) -> str | None:
    try:
        found = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return found if os.path.isabs(found) and os.path.exists(found) else None


ASAN, STDCXX = _runtime("libasan.so"), _runtime("libstdc++.so")
needs_asan = pytest.mark.skipif(ASAN is None or STDCXX is None,
                                reason="gcc has no AddressSanitizer runtime here")


def _run(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, STRIPE_SANITIZE="address", STRIPE_CACHE_DIR=str(tmp_path),
               ASAN_OPTIONS="detect_leaks=0", LD_PRELOAD=f"{ASAN} {STDCXX}",
               OMP_NUM_THREADS="2")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@needs_asan
def test_a_write_past_a_buffer_is_reported(tmp_path: Path) -> None:
    result = _run("""
        from stripe.codegen.build import build
        src = '''
        #include <stdint.h>
        #include <stdlib.h>
        void stripe_stats(int64_t *out) {}
        void stripe_reset_stats(void) {}
        int stripe_run(void **args) {
            float *p = (float *)malloc(16 * sizeof(float));
            volatile int64_t k = 16;
            p[k] = 1.0f;
            ((float *)args[0])[0] = p[k];
            free(p);
            return 0;
        }
        '''
        m = build(src)
        out = m.ffi.new("float[1]")
        m.lib.stripe_run(m.ffi.new("void *[1]", [out]))
        """, tmp_path)
    assert result.returncode != 0
    assert "heap-buffer-overflow" in result.stderr


@needs_asan
def test_optimised_programs_stay_in_bounds(tmp_path: Path) -> None:
    """Odd sizes through cpu_avx2 (packed tiles, micro-kernels and their ragged edges,
    fresh outputs, threads) and npu_example (staged and banked tiles), against numpy."""
    result = _run("""
        import numpy as np, stripe
        from benchmarks.workloads import CONV3X3, DEPTHWISE, GEMM_BIAS_RELU, MATMUL, SOFTMAX
        rng = np.random.default_rng(0)
        cases = [(CONV3X3, {"I": (1, 13, 11, 37), "F": (3, 3, 37, 45)}),
                 (CONV3X3, {"I": (1, 7, 7, 70), "F": (3, 3, 70, 53)}),
                 (MATMUL, {"A": (131, 97), "B": (97, 203)}),
                 (DEPTHWISE, {"I": (1, 23, 17, 35), "F": (3, 3, 35)}),
                 (GEMM_BIAS_RELU, {"A": (37, 61), "B": (61, 45), "Bias": (45,)}),
                 (SOFTMAX, {"I": (19, 70)})]
        for target, picked in (("cpu_avx2", cases[1:]), ("npu_example", cases[:1])):
            for src, shapes in picked:
                x = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
                prog = stripe.compile(src, x, target=target)
                prog.fill_byte = 0xFF
                want = stripe.interpret(stripe.lower(src, x), x)
                for k, v in prog(**x).items():
                    assert np.allclose(v, want[k], rtol=1e-4, atol=1e-4), (target, k)
        print("clean")
        """, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "clean" in result.stdout


def test_unknown_sanitizer_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRIPE_SANITIZE", "thread")
    with pytest.raises(StripeError, match="valid values: address"):
        sanitizer_flags()
    monkeypatch.setenv("STRIPE_SANITIZE", "address")
    assert sanitizer_flags() == SANITIZERS["address"]
    monkeypatch.delenv("STRIPE_SANITIZE")
    assert sanitizer_flags() == ()
