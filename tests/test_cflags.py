"""The C compiler flags a target may give (stripe.cflags), and the CPU checks of the flags'
instruction sets (missing_cpu_features, the build cache key)."""

from __future__ import annotations

import dataclasses
import platform
from pathlib import Path

import numpy as np
import pytest

import stripe
import stripe.codegen.build as build_mod
from stripe import cflags
from stripe.cflags import VALID_CFLAGS, cflag_ok, cflag_problem
from stripe.compiler import compile_program
from stripe.config import ConfigError, list_configs, load_config
from stripe.errors import StripeError
from stripe.target import HOST

X86 = platform.machine() in ("x86_64", "AMD64")
needs_gcc_x86 = pytest.mark.skipif(
    not X86 or "[enabled]" not in cflags.resolved_target(("-march=native",)),
    reason="needs gcc on x86-64 (-Q --help=target)")
COPY = "function (A[M]) -> (B) { B[i : M] = =(A[i]); }"


def error(tmp_path: Path, text: str) -> ConfigError:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.path == str(path)
    return err.value


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STRIPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(build_mod, "_loaded", {})
    return tmp_path / "cache"


@pytest.mark.parametrize("flag", [
    "-fplugin=evil.so", "-o", "/tmp/x", "-O3; rm -rf /", "-fdump-tree-all", "-Wl,-rpath,/x",
    "-I/etc", "-DX=1", "-mllvm", "-fprofile-generate", "--param", "-march=native; ls",
    "-fno-dump-x", "-include", "@file",
    # the flags that crash, abort or change results
    "-fcall-used-r12", "-ftrapv", "-ffast-math", "-ffinite-math-only", "-Ofast",
    "-fwhole-program", "-fleading-underscore", "-fassociative-math", "-fno-signed-zeros",
    "-ffixed-rbx", "-fwrapv", "-fopenmp", "-flto", "-m32", "-mno-red-zone", "-mno-sse2",
    "-fsanitize=address", "-mfoo", "-fanything", "-O4", "-g4", "-mprefer-vector-width=64",
])
def test_cflags_outside_the_list(tmp_path: Path, flag: str):
    assert not cflag_ok(flag)
    e = error(tmp_path, f'target: t\ncflags:\n  - -O2\n  - "{flag}"\n')
    assert e.line == 4 and f"cflag '{flag}' is not allowed" in str(e)
    assert "valid flags: -O0 -O1 -O2 -O3 -Os, -g -g0 -g1 -g2 -g3, -march=NAME" in str(e)


@pytest.mark.parametrize("flag, reason", [
    ("-ffast-math", "changes float results"), ("-Ofast", "changes float results"),
    ("-ffinite-math-only", "changes float results"), ("-ftrapv", "integer overflow"),
    ("-fcall-used-r12", "ABI"), ("-fleading-underscore", "ABI"), ("-fwhole-program", "ABI"),
    ("-fplugin=x.so", "loads code"),
])
def test_refusals_say_why(flag: str, reason: str):
    assert reason in (cflag_problem(flag) or "")


@pytest.mark.parametrize("flag", ["-O0", "-O3", "-Os", "-g", "-g0", "-g3", "-march=native",
                                  "-mtune=generic", "-mtune=native", "-mavx2", "-mno-avx512f",
                                  "-mfma", "-msse4.1", "-mavx512vnni", "-mavx512bf16",
                                  "-mprefer-vector-width=512", "-funroll-loops",
                                  "-fno-tree-vectorize", "-fomit-frame-pointer",
                                  "-fvect-cost-model=cheap"])
def test_cflags_on_the_list(flag: str):
    assert cflag_ok(flag)


@needs_gcc_x86
@pytest.mark.parametrize("flag, ok", [("-march=x86-64-v3", True), ("-march=bdver1", True),
                                      ("-mtune=znver3", True), ("-march=skylake-avx512", True),
                                      ("-march=nosuchcpu", False), ("-mtune=nosuchcpu", False),
                                      ("-march=i386", False)])
def test_march_and_mtune_name_what_the_compiler_knows(flag: str, ok: bool):
    # i386 exists, but not for x86-64
    assert cflag_ok(flag) is ok
    if not ok:
        assert "the C compiler knows no" in (cflag_problem(flag) or "")


def test_the_valid_list_is_the_list_shown():
    assert VALID_CFLAGS[0] == "-O0 -O1 -O2 -O3 -Os"
    listed = " ".join(VALID_CFLAGS)
    for flag in ("-funroll-loops", "avx512vnni", "sse4.1", "-mprefer-vector-width="):
        assert flag in listed
    for flag in listed.split():
        if flag.startswith("-f"):
            assert cflag_ok(flag), flag


def test_shipped_configs_use_allowed_flags():
    for name in list_configs():
        for flag in load_config(name).cflags:
            assert cflag_ok(flag), (name, flag)


@pytest.mark.parametrize("feature, cpuinfo", [
    ("avx512vnni", "avx512_vnni"), ("avx512bf16", "avx512_bf16"), ("sse4.1", "sse4_1"),
    ("sse4.2", "sse4_2"), ("sse3", "pni"), ("avx512vbmi2", "avx512_vbmi2"), ("bmi", "bmi1"),
    ("pclmul", "pclmulqdq"), ("sha", "sha_ni"), ("avxvnni", "avx_vnni"), ("avx2", "avx2"),
])
def test_features_are_looked_up_by_their_cpuinfo_name(monkeypatch, feature: str, cpuinfo: str):
    # a CPU with everything the compiler knows, as far as its -march=native goes
    monkeypatch.setattr(cflags, "host_features", lambda: frozenset(cflags._CPUINFO))
    flags = (f"-m{feature}",)
    assert cflags.missing_cpu_features(flags, frozenset({cpuinfo})) == []
    assert cflags.missing_cpu_features(flags, frozenset({feature + "x"})) == [feature]
    # a later -mno- undoes it
    assert cflags.missing_cpu_features(flags + (f"-mno-{feature}",), frozenset()) == []


@needs_gcc_x86
@pytest.mark.parametrize("has_vnni", [False, True])
def test_avx512vnni_runs_exactly_when_the_cpu_has_it(monkeypatch, has_vnni: bool):
    """On a simulated AVX-512 CPU with and without VNNI (cpuinfo: ``avx512_vnni``)."""
    cpu = {"sse2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl"}
    if has_vnni:
        cpu.add("avx512_vnni")
    host = cflags.enabled_features(cflags.resolved_target(("-mavx512vnni",)))
    assert "avx512vnni" in host and "avx512f" in host
    if not has_vnni:
        host -= {"avx512vnni"}
    monkeypatch.setattr(build_mod, "_cpu_flags", lambda: frozenset(cpu))
    monkeypatch.setattr(cflags, "host_features", lambda: host)
    assert cflag_ok("-mavx512vnni")
    missing = build_mod.missing_cpu_features(("-O3", "-mavx512vnni"))
    assert (missing == []) is has_vnni
    if not has_vnni:
        assert missing == ["avx512vnni"]


def test_the_real_cpu_agrees_with_cpuinfo():
    cpu = cflags.cpu_flags()
    if cpu is None or cflags.host_features() is None:
        pytest.skip("no /proc/cpuinfo or no gcc target report")
    for feature in ("avx2", "avx512f", "avx512vnni", "fma4"):
        missing = cflags.missing_cpu_features((f"-m{feature}",))
        assert (missing == []) is (cflags._CPUINFO[feature] in cpu), feature


@needs_gcc_x86
def test_march_of_another_cpu_enables_what_this_one_lacks():
    """-march=bdver1 enables fma4 and xop (AMD Bulldozer); this check sees them through
    what the compiler resolves the flag to, not through the flag's text."""
    host = cflags.host_features()
    assert host is not None
    missing = cflags.missing_cpu_features(("-O3", "-march=bdver1"))
    assert set(missing) == {"fma4", "xop", "lwp"} - host
    assert cflags.missing_cpu_features(("-O3", "-march=native")) == []


@needs_gcc_x86
@pytest.mark.parametrize("flags", [("-O2", "-march=bdver1"), ("-O2", "-mfma4"),
                                   ("-O2", "-mxop"), ("-O2", "-mavx512f")])
def test_a_program_for_extensions_this_cpu_lacks_never_runs(tmp_path, cache, flags):
    """Compiled (the C is checked) but never loaded: a clear error, not SIGILL."""
    missing = build_mod.missing_cpu_features(flags)
    if not missing:
        pytest.skip(f"this CPU has what {flags} asks for")
    config = tmp_path / "other_cpu.yaml"
    config.write_text(f"target: other_cpu\ncflags: [{', '.join(flags)}]\n")
    before = build_mod.build_count
    prog = stripe.compile(COPY, {"A": ((5,), "float32")}, target=str(config))
    assert build_mod.build_count == before + 1
    with pytest.raises(StripeError, match=f"compiled for {missing[0]}.*does not have"):
        prog(A=np.ones(5, np.float32))
    with pytest.raises(StripeError, match="does not have"):
        getattr(prog.module.lib, "stripe_run")  # noqa: B009


def test_targets_built_in_python_get_the_same_check(cache):
    program = stripe.lower(COPY, {"A": ((5,), "float32")})
    for flag in ("-ffast-math", "-fcall-used-r12", "-ftrapv"):
        target = dataclasses.replace(HOST, cflags=("-O2", flag))
        with pytest.raises(build_mod.FlagError, match=f"cflag '{flag}' is not allowed.*"
                                                      "valid flags: -O0"):
            compile_program(program, target=target)
    prog = compile_program(program, target=dataclasses.replace(HOST, cflags=("-O1",)))
    np.testing.assert_array_equal(prog(A=np.arange(5, dtype=np.float32))["B"], np.arange(5))


@needs_gcc_x86
def test_the_cache_key_holds_the_cpu_that_native_resolves_to(monkeypatch):
    """A cache filled on a CPU with other instruction sets is another key here: the key
    holds what -march=native resolves to, not the flag's text."""
    flags = build_mod.BASE_FLAGS + ("-march=native",)
    here = build_mod.cache_key("int x;", flags)
    real = cflags.resolved_target

    def on_bulldozer(given: tuple[str, ...]) -> str:
        return real(tuple("-march=bdver1" if f == "-march=native" else f for f in given))

    monkeypatch.setattr(cflags, "resolved_target", on_bulldozer)
    there = build_mod.cache_key("int x;", flags)
    assert there != here
    monkeypatch.setattr(cflags, "resolved_target", real)
    assert build_mod.cache_key("int x;", flags) == here
    # other flags than -march=native are resolved too (a tuning change is a new key)
    assert build_mod.cache_key("int x;", flags + ("-mtune=generic",)) != here


@needs_gcc_x86
def test_a_cache_filled_on_another_cpu_is_not_loaded(cache, monkeypatch):
    program = stripe.lower(COPY, {"A": ((7,), "float32")})
    real = cflags.resolved_target
    monkeypatch.setattr(cflags, "resolved_target", lambda given: real(tuple(
        "-march=bdver1" if f == "-march=native" else f for f in given)))
    before = build_mod.build_count
    compile_program(program)  # the other machine fills the cache
    monkeypatch.setattr(cflags, "resolved_target", real)
    build_mod._loaded.clear()
    prog = compile_program(program)  # this one builds its own
    assert build_mod.build_count == before + 2
    x = np.arange(7, dtype=np.float32)
    np.testing.assert_array_equal(prog(A=x)["B"], x)
