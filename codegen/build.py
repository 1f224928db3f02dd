"""Compile emitted C with cffi (API mode) into a persistent, content-addressed cache.

The cache key hashes the C source, the compiler flags, what the compiler resolves the target
flags to on this CPU (``-march=native`` names this CPU's instruction sets), the compiler's
version and the Python ABI. One process builds a key at a time (a lock file per key), in a
temporary directory inside the cache, and renames the module into place, so a concurrent
reader never sees half a file. Beside each module a ``.sha256`` file records the module's
hash and file name; an entry whose hash does not match (a corrupt or truncated file) is
rebuilt, never loaded. A cache directory that cannot be written is replaced, with a warning,
by a private temporary one. See docs/codegen.md#the-build-cache.

A large program (at least :data:`PARALLEL_LINES` lines of C: a whole network) is compiled in
parallel parts when the process has several cores: gcc's link-time optimisation splits the
translation unit's functions (each kernel is one, and each OpenMP region) into balanced
partitions and compiles them in as many jobs as the process has cores
(``STRIPE_BUILD_JOBS`` overrides the count; 1 compiles in one piece). The partitions get
the same flags; the module computes the same results either way, so the cache key does not
depend on it.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import hashlib
import importlib.machinery
import importlib.util
import itertools
import os
import re
import shutil
import socket
import sys
import sysconfig
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from stripe import cflags as _cflags
from stripe import progress as _progress
from stripe.errors import CompileError, StripeError

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
# preload the runtime (docs/codegen.md#checking-memory-accesses). STRIPE_SANITIZE=undefined
# builds with UndefinedBehaviorSanitizer, which stops the process at the first undefined
# operation (an overflowing signed addition, a shift past the width, a misaligned access).
SANITIZERS = {"address": ("-fsanitize=address", "-fno-omit-frame-pointer"),
              "undefined": ("-fsanitize=undefined", "-fno-sanitize-recover=undefined")}


# flags the link step also gets: UBSan's runtime is a dependency of the module (ASan's must be
# preloaded instead, before anything else)
_LINKED = ("-fsanitize=undefined",)


PARALLEL_LINES = 4000
"""C sources of at least this many lines are compiled in parallel parts (see the module
docstring); smaller ones in one piece (the split costs more than it saves)."""


def build_jobs() -> int:
    """How many C compiler jobs a large program is compiled in: ``STRIPE_BUILD_JOBS`` (a
    positive integer) when set, else the cores this process may run on (its affinity mask).
    A value that is not a positive integer raises StripeError."""
    text = os.environ.get("STRIPE_BUILD_JOBS", "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise StripeError(f"STRIPE_BUILD_JOBS={text[:40]!r} is not a positive integer")
        return min(int(text), 64)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@cache
def _is_gcc(cc: str) -> bool:
    """Does ``cc`` behave as gcc (its ``-flto=N`` partitions a unit into N jobs)? Clang,
    which also defines ``__GNUC__``, does not."""
    out = _cflags._run([cc, "-dM", "-E", "-x", "c", os.devnull])
    text = "" if out is None else out.stdout
    return "#define __GNUC__" in text and "__clang__" not in text


def parallel_flags(source: str, flags: tuple[str, ...]) -> tuple[str, ...]:
    """The flags that compile ``source`` (built with ``flags``) in parallel parts, for both
    the compile and the link step; none for a small source, one job, a compiler other than
    gcc, or a sanitizer build."""
    jobs = build_jobs()
    if (jobs < 2 or source.count("\n") < PARALLEL_LINES
            or any(f.startswith("-fsanitize") for f in flags) or not _is_gcc(_compiler())):
        return ()
    return (f"-flto={jobs}", "-flto-partition=balanced")


def sanitizer_flags() -> tuple[str, ...]:
    """The flags ``STRIPE_SANITIZE`` asks for: one name of :data:`SANITIZERS` or several
    joined by commas (``address,undefined``); none when unset."""
    value = os.environ.get("STRIPE_SANITIZE", "")
    if not value:
        return ()
    names = value.split(",")
    if any(n not in SANITIZERS for n in names) or len(set(names)) != len(names):
        raise StripeError(f"STRIPE_SANITIZE={value!r} is not a sanitizer stripe knows; valid "
                          f"values: {', '.join(sorted(SANITIZERS))}, or several joined by "
                          f"commas (or unset)")
    return tuple(f for n in names for f in SANITIZERS[n])


# How many times the C compiler ran in this process (tests use it to check cache hits).
build_count = 0
# A file that gets one line per compiler run, from every process (STRIPE_BUILD_LOG; tests of
# the lock count the builds of several processes with it).
_BUILD_LOG = "STRIPE_BUILD_LOG"
# Temporary build directories of another host, or of a process of this host that no longer
# runs, older than this are removed by the next build.
STALE_SECONDS = 30 * 60


class FlagError(StripeError, ValueError):
    """A C compiler flag that may not be used (see :mod:`stripe.cflags`)."""


def cache_dir() -> Path:
    """The configured cache directory: ``$STRIPE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/stripe``, else ``~/.cache/stripe`` (it may not be usable: see
    :func:`usable_cache_dir`)."""
    env = os.environ.get("STRIPE_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "stripe"


_private: Path | None = None
_warned: set[str] = set()


def _private_dir() -> Path:
    """This process's own temporary cache, removed when it exits."""
    global _private
    if _private is None:
        try:
            _private = Path(tempfile.mkdtemp(prefix="stripe-cache-"))
        except OSError as e:
            raise StripeError(f"neither the stripe cache {cache_dir()} nor a temporary "
                              f"directory ({tempfile.gettempdir()}) can be written: {e}") from e
        atexit.register(shutil.rmtree, _private, ignore_errors=True)
    return _private


def _fall_back(root: Path, why: object) -> Path:
    """Warn (once per directory) that ``root`` is unusable; the private cache instead."""
    if str(root) not in _warned:
        _warned.add(str(root))
        warnings.warn(f"the stripe cache {root} cannot be used ({why}); this process "
                      f"compiles into a private temporary cache instead", RuntimeWarning,
                      stacklevel=3)
    return _private_dir()


def private_cache_dir() -> Path | None:
    """The private cache this process fell back to, if it did."""
    return _private


@cache
def _writable(root: Path) -> str | None:
    """None when ``root`` can be created and written, else why not (checked once)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=root)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return e.strerror or str(e)
    return None


def usable_cache_dir() -> Path:
    """:func:`cache_dir` when it can be written, else (with a warning, once) a private
    temporary directory of this process."""
    root = cache_dir()
    why = _writable(root)
    return root if why is None else _fall_back(root, why)


def _compiler() -> str:
    return _cflags.compiler()


@cache
def compiler_version(cc: str) -> str:
    out = _cflags._run([cc, "--version"])
    if out is None:
        raise StripeError(f"no C compiler: cannot run {cc!r}")
    return out.stdout.splitlines()[0] if out.stdout else cc


def cache_key(source: str, flags: tuple[str, ...]) -> str:
    """The cache key of ``source`` built with ``flags`` on this machine: it also covers the
    compiler's resolution of the target flags (this CPU's instruction sets for
    ``-march=native``), its version, the Python ABI and the platform."""
    h = hashlib.sha256()
    for part in (source, "\0".join(flags), _cflags.resolved_target(flags),
                 compiler_version(_compiler()), sys.implementation.cache_tag or "",
                 sysconfig.get_platform()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _compiler_message(c_file: Path, flags: tuple[str, ...]) -> str:
    """Re-run the compiler on the plain source to capture its diagnostics."""
    out = _cflags._run([_compiler(), "-fsyntax-only", *flags, str(c_file)])
    return "" if out is None else (out.stderr or out.stdout).strip()


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _suffix() -> str:
    return importlib.machinery.EXTENSION_SUFFIXES[0]


def _cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags from /proc/cpuinfo (None where that is not available)."""
    return _cflags.cpu_flags()


def missing_cpu_features(flags: tuple[str, ...]) -> list[str]:
    """The x86 extensions that ``flags`` compile for and this CPU lacks (see
    :func:`stripe.cflags.missing_cpu_features`); empty when the CPU's features are unknown.
    Code built with them would die of an illegal instruction here."""
    return _cflags.missing_cpu_features(tuple(flags), _cpu_flags())


def check_flags(flags: tuple[str, ...]) -> None:
    """Raise :class:`FlagError` for the first of a target's ``flags`` that
    :func:`stripe.cflags.cflag_problem` refuses."""
    for flag in flags:
        problem = _cflags.cflag_problem(flag)
        if problem:
            raise FlagError(f"cflag {flag!r} {problem}; valid flags: "
                            f"{', '.join(_cflags.VALID_CFLAGS)}")


class _Unrunnable:
    """The ``lib`` of a module built for instruction sets this CPU lacks: never loaded."""

    def __init__(self, missing: list[str], flags: tuple[str, ...]) -> None:
        self._message = (f"this program was compiled for {', '.join(missing)}, which this "
                         f"CPU does not have (flags {' '.join(flags)}); compile it for "
                         f"another target (e.g. cpu_avx2 or cpu_generic)")

    def __getattr__(self, name: str) -> object:
        raise StripeError(self._message)


def _unrunnable(name: str, missing: list[str], flags: tuple[str, ...]) -> ModuleType:
    """A stand-in for the module ``name``: its ``ffi`` knows the entry points' types, its
    ``lib`` raises a :class:`StripeError` naming the missing extensions."""
    import cffi

    module = ModuleType(name)
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    module.ffi = ffi  # type: ignore[attr-defined]
    module.lib = _Unrunnable(missing, flags)  # type: ignore[attr-defined]
    return module


_loaded: dict[str, ModuleType] = {}
# module files this process has handed to the loader, and the modules they gave: the dynamic
# loader and Python keep a library by path and name, so a module file that is rebuilt after
# this process loaded it (or failed to) is built under a new name, at a new path
_by_path: dict[str, ModuleType | None] = {}
_fresh = itertools.count(1)
_load_errors: dict[str, str] = {}  # why the last load of an entry failed, for the message


def _load(name: str, path: Path) -> ModuleType:
    _by_path[str(path)] = None
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _by_path[str(path)] = module
    return module


def _read_entry(root: Path, name: str) -> tuple[str, Path] | None:
    """The recorded hash and module file of ``name`` (None when absent or malformed)."""
    try:
        text = (root / f"{name}.sha256").read_text()
    except (OSError, UnicodeDecodeError):
        return None
    parts = text.split()
    if not parts or not re.fullmatch(r"[0-9a-f]{64}", parts[0]):
        return None
    module = parts[1] if len(parts) > 1 else name
    if len(parts) > 2 or not re.fullmatch(re.escape(name) + r"(_\d+_\d+)?", module):
        return None
    return parts[0], root / f"{module}{_suffix()}"


def _load_cached(root: Path, name: str, runnable: bool) -> ModuleType | None:
    """The valid cached module of ``name`` in ``root`` (loaded when ``runnable``), or None."""
    entry = _read_entry(root, name)
    if entry is None:
        return None
    digest, path = entry
    try:
        if _file_hash(path) != digest:
            return None
        if not runnable:
            return ModuleType(name)  # the entry is valid; never loaded here
        if str(path) in _by_path:  # loaded before: that module, or None if it failed
            return _by_path[str(path)]
        return _load(path.name[:-len(_suffix())], path)
    except (OSError, ImportError) as e:
        _load_errors[name] = str(e)
        return None  # rebuild


T = TypeVar("T")


def _with_fallback(root: Path, work: Callable[[Path], T]) -> T:
    """``work(root)``; when that fails for the cache directory's sake (an ``OSError``: a
    read-only or full disk), warn once and do it again in the private cache."""
    try:
        return work(root)
    except OSError as e:
        if root == _private:
            raise StripeError(f"cannot write the private stripe cache {root}: {e}") from e
        return work(_fall_back(root, e.strerror or e))


def build(source: str, flags: tuple[str, ...] = (), openmp: bool = False) -> ModuleType:
    """The cffi extension module for ``source`` built with the target's ``flags`` (each
    allowed by :func:`stripe.cflags.cflag_problem`, else :class:`FlagError`), from the
    cache when present. Built for instruction sets this CPU lacks, the module is compiled
    (so that errors show) but never loaded: its ``lib`` raises a :class:`StripeError`."""
    flags = tuple(flags)
    check_flags(flags)
    all_flags = (BASE_FLAGS + sanitizer_flags() + flags
                 + (("-fopenmp",) if openmp else ()))
    key = cache_key(source, all_flags)
    name = f"_stripe_{key}"
    if name in _loaded:
        return _loaded[name]
    missing = missing_cpu_features(all_flags)

    def work(root: Path) -> ModuleType:
        found = _load_cached(root, name, not missing)
        if found is None:
            with _key_lock(root, name):
                found = _load_cached(root, name, not missing)  # built while we waited?
                if found is None:
                    module_name = name
                    if str(root / f"{name}{_suffix()}") in _by_path:
                        module_name = f"{name}_{os.getpid()}_{next(_fresh)}"
                    _compile_into(name, module_name, source, all_flags, openmp, root)
                    found = _load_cached(root, name, not missing)
        if found is None:
            raise StripeError(f"the module built for {name} in {root} cannot be loaded: "
                              f"{_load_errors.get(name, 'its file does not match its hash')}")
        return found

    # reading needs no write access: a read-only cache that holds the module serves it
    module = (_load_cached(cache_dir(), name, not missing)
              or _with_fallback(usable_cache_dir(), work))
    if missing:
        return _unrunnable(name, missing, all_flags)
    _loaded[name] = module
    return module


@contextmanager
def _key_lock(root: Path, name: str) -> Iterator[None]:
    """Hold the lock of ``name`` in ``root``: one process builds a key, the others wait
    for it and then load its module. The kernel releases it when a process dies."""
    fd = os.open(root / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


_TMP_RE = re.compile(r"_stripe_[0-9a-f]+\.tmp\.(?P<host>[^.]+)\.(?P<pid>\d+)\.")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by another user
    return True


def clean_stale(root: Path, now: float | None = None) -> list[Path]:
    """Remove the temporary build directories in ``root`` that no build owns any more: made
    by a process of this host that no longer runs, or older than :data:`STALE_SECONDS`.
    Returns those removed."""
    now = time.time() if now is None else now
    host = _host()
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        m = _TMP_RE.match(entry.name)
        if m is None or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        mine = m.group("host") == host
        if (mine and not _alive(int(m.group("pid")))) or age > STALE_SECONDS:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
    return removed


@cache
def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40] or "host"


def _write_atomic(path: Path, data: str, tmp: Path) -> None:
    """Write ``data`` to ``path`` through ``tmp`` (renamed into place: never half a file)."""
    try:
        tmp.write_text(data)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def _compile_into(name: str, module_name: str, source: str, flags: tuple[str, ...],
                  openmp: bool, root: Path) -> None:
    """Build ``source`` as the module ``module_name`` and record it as the entry ``name``
    in ``root`` (the caller holds the key's lock)."""
    global build_count
    import cffi  # deferred: importing cffi's build machinery costs time on the warm path

    clean_stale(root)
    tmp = Path(tempfile.mkdtemp(prefix=f"{name}.tmp.{_host()}.{os.getpid()}.", dir=root))
    try:
        ffi = cffi.FFI()
        ffi.cdef(CDEF)
        parts = parallel_flags(source, flags)
        # the link step of a parallel build compiles the parts: it gets every flag
        linked = list(flags) if parts else [f for f in flags if f in _LINKED]
        ffi.set_source(module_name, source, extra_compile_args=list(flags + parts),
                       extra_link_args=(["-fopenmp"] if openmp else []) + linked
                       + list(parts), libraries=["m"])
        build_count += 1
        _progress.step("compile C")
        log = os.environ.get(_BUILD_LOG)
        if log:
            with open(log, "a") as f:
                f.write(f"{os.getpid()} {name}\n")
        try:
            built = Path(ffi.compile(tmpdir=str(tmp), verbose=False))
        except Exception as e:  # distutils/setuptools raise several types on compiler errors
            if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EROFS,
                                                      errno.EACCES, errno.EDQUOT):
                raise
            raise _failure(name, source, flags, root, tmp, e) from e
        so_path = root / f"{module_name}{_suffix()}"
        staged = tmp / so_path.name
        if built != staged:
            shutil.move(str(built), staged)
        digest = _file_hash(staged)
        previous = _read_entry(root, name)
        os.replace(staged, so_path)
        _write_atomic(root / f"{name}.c", source, tmp / "c")
        record = digest if module_name == name else f"{digest} {module_name}"
        _write_atomic(root / f"{name}.sha256", record, tmp / "sum")
        if previous is not None and previous[1] != so_path:
            previous[1].unlink(missing_ok=True)  # a module file no entry names any more
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _failure(name: str, source: str, flags: tuple[str, ...], root: Path, tmp: Path,
             error: Exception) -> CompileError:
    """The :class:`CompileError` of a failed build, with the source kept (in the cache, or
    in the private cache when the cache cannot take it: never an empty file)."""
    kept = root / f"{name}.failed.c"
    try:
        _write_atomic(kept, source, tmp / "failed")
    except OSError:
        kept = _private_dir() / f"{name}.failed.c"
        kept.write_text(source)
    return CompileError("C compilation failed", str(kept),
                        _compiler_message(kept, flags) or str(error))
