"""Emitted C under the sanitizers: the optimised programs stay inside their buffers
(AddressSanitizer) and do nothing undefined (UndefinedBehaviorSanitizer).

``STRIPE_SANITIZE=address`` builds every program with ``-fsanitize=address``. Python is not
instrumented, so each check runs in a subprocess that preloads gcc's ASan runtime (and
libstdc++, whose exceptions islpy throws). ``STRIPE_SANITIZE=undefined`` links UBSan's
runtime into each module and stops at the first report. A control program with the fault
(a write one element past a ``malloc``-ed buffer, a signed overflow) must be reported, or
the harness proves nothing. The catalogue runs through every runnable shipped config under
both: a sample of it by default, all of it under ``--hypothesis-profile=long``. Skipped
where gcc has no runtime for the sanitizer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import runnable_configs
from hypothesis import settings
from ops_catalog import OPS

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
UBSAN = _runtime("libubsan.so")
needs_asan = pytest.mark.skipif(ASAN is None or STDCXX is None,
                                reason="gcc has no AddressSanitizer runtime here")
needs_ubsan = pytest.mark.skipif(UBSAN is None,
                                 reason="gcc has no UndefinedBehaviorSanitizer runtime here")
SANITIZER_PARAMS = [pytest.param("address", marks=needs_asan, id="address"),
                    pytest.param("undefined", marks=needs_ubsan, id="undefined")]


def _run(script: str, tmp_path: Path, sanitizer: str = "address",
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, STRIPE_SANITIZE=sanitizer, STRIPE_CACHE_DIR=str(tmp_path),
               OMP_NUM_THREADS="2")
    if sanitizer == "address":
        env.update(ASAN_OPTIONS="detect_leaks=0", LD_PRELOAD=f"{ASAN} {STDCXX}")
    else:
        env.update(UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _long() -> bool:
    return settings._current_profile == "long"  # type: ignore[attr-defined]


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


@needs_ubsan
def test_a_signed_overflow_is_reported(tmp_path: Path) -> None:
    result = _run("""
        from stripe.codegen.build import build
        src = '''
        #include <stdint.h>
        void stripe_stats(int64_t *out) {}
        void stripe_reset_stats(void) {}
        int stripe_run(void **args) {
            volatile int32_t k = 2147483647;
            ((int32_t *)args[0])[0] = k + 1;
            return 0;
        }
        '''
        m = build(src)
        out = m.ffi.new("int32_t[1]")
        m.lib.stripe_run(m.ffi.new("void *[1]", [out]))
        print("not reported")
        """, tmp_path, "undefined")
    assert result.returncode != 0 and "not reported" not in result.stdout
    assert "runtime error: signed integer overflow" in result.stderr


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


CATALOGUE = """
    import sys
    sys.path.insert(0, "tests")
    import numpy as np, stripe
    from ops_catalog import OPS_BY_NAME, random_inputs
    pairs = {pairs!r}
    for config, name in pairs:
        op = OPS_BY_NAME[name]
        arrays = random_inputs(op)
        prog = stripe.compile(op.source, op.input_specs(), target=config)
        prog.fill_byte = 0xFF
        got = prog(**arrays)
        for out, want in op.reference(**arrays).items():
            if np.issubdtype(want.dtype, np.floating):
                ok = np.allclose(got[out], want, rtol=op.rtol, atol=op.atol)
            else:
                ok = np.array_equal(got[out], want)
            assert ok, (config, name, out)
    print("clean", len(pairs))
    """
# the host (no passes, -march=native) and every shipped config this CPU runs
CONFIGS: list[str | None] = [None, *(p.values[0] for p in runnable_configs() if not p.marks)]


def _check_catalogue(pairs: list[tuple[str | None, str]], sanitizer: str,
                     tmp_path: Path) -> None:
    result = _run(CATALOGUE.format(pairs=pairs), tmp_path, sanitizer, timeout=7200)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"clean {len(pairs)}" in result.stdout


@pytest.mark.parametrize("sanitizer", SANITIZER_PARAMS)
def test_a_sample_of_the_catalogue_is_clean(tmp_path: Path, sanitizer: str) -> None:
    """Three catalogue programs, each through another config, another sample under each
    sanitizer."""
    offset = sorted(SANITIZERS).index(sanitizer)
    pairs = [(CONFIGS[(3 * offset + k) % len(CONFIGS)],
              OPS[(17 * k + 29 * offset) % len(OPS)].name) for k in range(3)]
    _check_catalogue(pairs, sanitizer, tmp_path)


@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("sanitizer", SANITIZER_PARAMS)
def test_the_whole_catalogue_is_clean(tmp_path: Path, sanitizer: str,
                                      config: str | None) -> None:
    """Every catalogue program through ``config`` (None: the host, no passes); only under
    ``--hypothesis-profile=long``."""
    if not _long():
        pytest.skip("the whole catalogue runs under --hypothesis-profile=long")
    _check_catalogue([(config, op.name) for op in OPS], sanitizer, tmp_path)


def test_unknown_sanitizer_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ("thread", "address,thread", "address,address", ","):
        monkeypatch.setenv("STRIPE_SANITIZE", bad)
        with pytest.raises(StripeError, match="valid values: address, undefined"):
            sanitizer_flags()
    monkeypatch.setenv("STRIPE_SANITIZE", "address")
    assert sanitizer_flags() == SANITIZERS["address"]
    monkeypatch.setenv("STRIPE_SANITIZE", "undefined")
    assert sanitizer_flags() == SANITIZERS["undefined"]
    monkeypatch.setenv("STRIPE_SANITIZE", "address,undefined")
    assert sanitizer_flags() == SANITIZERS["address"] + SANITIZERS["undefined"]
    monkeypatch.delenv("STRIPE_SANITIZE")
    assert sanitizer_flags() == ()
