"""Compile emitted C with cffi (API mode) into a persistent, content-addressed cache.

The cache key hashes the C source, the compiler flags, the compiler's version and the Python
ABI. A built module is written to a temporary directory inside the cache and renamed into
place, so a concurrent reader never sees half a file. Beside each module a ``.sha256`` file
records the module's hash; an entry whose hash does not match (a corrupt or truncated file)
is rebuilt, never loaded.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from functools import cache
from pathlib import Path
from types import ModuleType

from stripe.errors import StripeError

CDEF = ("int stripe_run(void **args); void stripe_stats(int64_t *out); "
        "void stripe_reset_stats(void);")
# -fno-trapping-math and -fno-math-errno change no result (nothing reads FP exception flags
# or errno) but let gcc if-convert float selections (relu, max) and vectorise sqrt. Views
# and indexes a block declares but never uses are normal in emitted code: no warnings.
# -g0: Python's own CFLAGS (which cffi passes first) ask for debug info, which takes a large
# share of gcc's time on the larger programs and serves nothing here.
# -fno-predictive-commoning: gcc 12's predictive commoning invents stores in OpenMP loops,
# onto another thread's part of a buffer (docs/codegen.md#flags, tests/test_pass_threads.py).
BASE_FLAGS = ("-O3", "-g0", "-fno-wrapv", "-ffp-contract=fast", "-fno-trapping-math",
              "-fno-math-errno", "-fno-predictive-commoning", "-std=c11",
              "-Wno-unused-variable", "-Wno-unused-but-set-variable")

# STRIPE_SANITIZE=address builds every program with AddressSanitizer, to check that the
# emitted C stays inside its buffers; Python itself is not instrumented, so the process must
# preload the runtime (docs/codegen.md#checking-memory-accesses).
SANITIZERS = {"address": ("-fsanitize=address", "-fno-omit-frame-pointer")}


def sanitizer_flags() -> tuple[str, ...]:
    """The flags ``STRIPE_SANITIZE`` asks for (none when unset)."""
    name = os.environ.get("STRIPE_SANITIZE", "")
    if not name:
        return ()
    if name not in SANITIZERS:
        raise StripeError(f"STRIPE_SANITIZE={name!r} is not a sanitizer stripe knows; valid "
                          f"values: {', '.join(sorted(SANITIZERS))} (or unset)")
    return SANITIZERS[name]


# How many times the C compiler ran in this process (tests use it to check cache hits).
build_count = 0


class CompileError(StripeError):
    """The C compiler failed. ``c_path`` is the kept source, ``log`` the compiler's output."""

    def __init__(self, message: str, c_path: str, log: str) -> None:
        self.c_path = c_path
        self.log = log
        super().__init__(f"{message}\n  source kept at {c_path}\n{log}")


def cache_dir() -> Path:
    env = os.environ.get("STRIPE_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "stripe"


def _compiler() -> str:
    return os.environ.get("CC") or sysconfig.get_config_var("CC").split()[0] or "cc"


@cache
def compiler_version(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise StripeError(f"no C compiler: cannot run {cc!r} ({e})") from e
    return out.stdout.splitlines()[0] if out.stdout else cc


def cache_key(source: str, flags: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for part in (source, "\0".join(flags), compiler_version(_compiler()),
                 sys.implementation.cache_tag or "", sysconfig.get_platform()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _compiler_message(c_file: Path, flags: tuple[str, ...]) -> str:
    """Re-run the compiler on the plain source to capture its diagnostics."""
    cmd = [_compiler(), "-fsyntax-only", *flags, str(c_file)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.stderr or out.stdout).strip()


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _suffix() -> str:
    return importlib.machinery.EXTENSION_SUFFIXES[0]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_loaded: dict[str, ModuleType] = {}

# -m<feature> flags that /proc/cpuinfo reports under another name
_CPUINFO_NAMES = {"sse4.1": "sse4_1", "sse4.2": "sse4_2", "sse3": "pni"}
_X86_FEATURES = {"sse3", "ssse3", "sse4.1", "sse4.2", "avx", "avx2", "fma", "f16c", "bmi",
                 "bmi2", "avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512cd",
                 "avx512vnni", "avx512bf16", "avx512fp16", "amx-tile"}


@cache
def _cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags from /proc/cpuinfo (None where that is not available)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return None


def missing_cpu_features(flags: tuple[str, ...]) -> list[str]:
    """The x86 features that ``flags`` compile for (``-mavx512f``) and this CPU lacks, by
    /proc/cpuinfo; empty when the CPU's features are unknown. Code built with them would
    die of an illegal instruction here."""
    have = _cpu_flags()
    if have is None:
        return []
    missing = []
    for flag in flags:
        feature = flag[2:] if flag.startswith("-m") else ""
        if feature in _X86_FEATURES:
            name = _CPUINFO_NAMES.get(feature, feature.replace("-", "_"))
            if name not in have:
                missing.append(feature)
    return missing


def build(source: str, flags: tuple[str, ...] = (), openmp: bool = False) -> ModuleType:
    """The cffi extension module for ``source`` (from the cache when present)."""
    all_flags = (BASE_FLAGS + sanitizer_flags() + tuple(flags)
                 + (("-fopenmp",) if openmp else ()))
    key = cache_key(source, all_flags)
    name = f"_stripe_{key}"
    if name in _loaded:
        return _loaded[name]
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    so_path = root / f"{name}{_suffix()}"
    sum_path = root / f"{name}.sha256"
    if so_path.exists() and sum_path.exists():
        try:
            if sum_path.read_text().strip() == _file_hash(so_path):
                _loaded[name] = _load(name, so_path)
                return _loaded[name]
        except (OSError, ImportError):
            pass  # fall through: rebuild
    _compile_into(name, source, all_flags, openmp, root, so_path, sum_path)
    _loaded[name] = _load(name, so_path)
    return _loaded[name]


def _compile_into(name: str, source: str, flags: tuple[str, ...], openmp: bool, root: Path,
                  so_path: Path, sum_path: Path) -> None:
    global build_count
    import cffi  # deferred: importing cffi's build machinery costs time on the warm path

    tmp = Path(tempfile.mkdtemp(prefix=f"{name}.", dir=root))
    try:
        ffi = cffi.FFI()
        ffi.cdef(CDEF)
        ffi.set_source(name, source, extra_compile_args=list(flags),
                       extra_link_args=["-fopenmp"] if openmp else [], libraries=["m"])
        build_count += 1
        try:
            built = Path(ffi.compile(tmpdir=str(tmp), verbose=False))
        except Exception as e:  # distutils/setuptools raise several types on compiler errors
            kept = root / f"{name}.failed.c"
            kept.write_text(source)
            raise CompileError("C compilation failed", str(kept),
                               _compiler_message(kept, flags) or str(e)) from e
        staged = tmp / so_path.name
        if built != staged:
            shutil.move(str(built), staged)
        digest = _file_hash(staged)
        os.replace(staged, so_path)
        sum_tmp = tmp / "sum"
        sum_tmp.write_text(digest)
        os.replace(sum_tmp, sum_path)
        (root / f"{name}.c").write_text(source)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
