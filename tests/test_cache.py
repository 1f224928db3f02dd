"""The caches under corruption, concurrency and faults: the pipeline cache verifies or
recomputes everything it reads; the build cache builds a key once across processes, cleans
what killed processes leave, falls back to a private cache when its directory cannot be
written, and loads a rebuilt module under a new name."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stripe
import stripe.codegen.build as build_mod
import stripe.compiler as compiler_mod
from stripe import pipeline_cache
from stripe.codegen.c_emitter import emit_c
from stripe.config import load_config
from stripe.errors import StripeError
from stripe.passes.manager import run_pipeline

ROOT = Path(__file__).resolve().parent.parent
MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STRIPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(build_mod, "_loaded", {})
    monkeypatch.setattr(build_mod, "_private", None)  # no other test's fallback cache
    return tmp_path / "cache"


def tiny(value: int) -> str:
    """A C program for ``build`` whose stripe_run returns ``value``."""
    return ("#include <stdint.h>\nvoid stripe_stats(int64_t *out) {}\n"
            "void stripe_reset_stats(void) {}\n"
            f"int stripe_run(void **args) {{ return {value}; }}\n")


# the pipeline cache ---------------------------------------------------------------------------


def entry_path(cache: Path) -> Path:
    (path,) = cache.glob("_pipeline_*.json")
    return path


def rewrite(path: Path, change: Any, checksum: bool = True) -> None:
    """Apply ``change(data)`` to the entry at ``path``, recomputing its checksum."""
    data = json.loads(path.read_text())
    change(data)
    if checksum:
        fields = {k: v for k, v in data.items() if k != "sha256"}
        data["sha256"] = pipeline_cache._checksum(fields)
    path.write_text(json.dumps(data))


def matmul_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"A": rng.standard_normal((5, 7)).astype(np.float32),
            "B": rng.standard_normal((7, 3)).astype(np.float32)}


def count_pipelines(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = compiler_mod.run_pipeline

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(compiler_mod, "run_pipeline", counting)
    return calls


def test_an_entry_round_trips_and_is_used(cache, monkeypatch, rng):
    calls = count_pipelines(monkeypatch)
    x = matmul_inputs(rng)
    first = stripe.compile(MATMUL, x, target="cpu_avx2")
    second = stripe.compile(MATMUL, x, target="cpu_avx2")
    assert len(calls) == 1 and second.c_program == first.c_program
    np.testing.assert_allclose(second(**x)["C"], x["A"] @ x["B"], rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache for the tests below: their modules are built once."""
    return tmp_path_factory.mktemp("shared-cache")


@pytest.mark.parametrize("checksum", [True, False])
@pytest.mark.parametrize("field, value", [("sizes", [5, 2]), ("sizes", [50, 30]),
                                          ("strides", [1, 5]), ("strides", [0, 0]),
                                          ("dtype", "float64"), ("is_output", False),
                                          ("name", "A")])
def test_a_changed_output_buffer_is_a_miss(shared_cache, monkeypatch, rng, checksum, field,
                                           value):
    """The output's spec decides how the output is allocated: changed in the file (with its
    checksum recomputed or not), the entry is not used and the result stays right."""
    monkeypatch.setenv("STRIPE_CACHE_DIR", str(shared_cache))
    for old in shared_cache.glob("_pipeline_*.json"):
        old.unlink()
    x = matmul_inputs(rng)
    stripe.compile(MATMUL, x, target="cpu_avx2")
    rewrite(entry_path(shared_cache), lambda d: d["buffers"][2].__setitem__(field, value),
            checksum)
    calls = count_pipelines(monkeypatch)
    prog = stripe.compile(MATMUL, x, target="cpu_avx2")
    assert len(calls) == 1  # a miss: the passes ran again
    got = prog(**x)["C"]
    assert got.shape == (5, 3)
    np.testing.assert_allclose(got, x["A"] @ x["B"], rtol=1e-5, atol=1e-5)


DEEP = "[" * 100_000 + "]" * 100_000
BAD_VALUES = [None, True, 1.5, -1, 2 ** 63, "x", "", [], {}, [None], [-1], [2 ** 64], {"a": 1},
              ["x", 1], "\x00"]


def mutations() -> list[tuple[str, Any]]:
    """(description, change of the entry's dict): every field, the buffers' fields and the
    entry's shape, replaced by every kind of wrong value."""
    out: list[tuple[str, Any]] = []
    for top in sorted(pipeline_cache._FIELDS):
        for k, v in enumerate(BAD_VALUES):
            if top == "allocations" and v == []:
                continue  # names for messages only: any list of strings will do
            out.append((f"{top}={k}", lambda d, t=top, v=v: d.__setitem__(t, v)))
        out.append((f"no {top}", lambda d, t=top: d.pop(t)))
    for field in sorted(pipeline_cache._BUFFER_FIELDS):
        for k, v in enumerate(BAD_VALUES):
            out.append((f"buffers.{field}={k}",
                        lambda d, f=field, v=v: d["buffers"][0].__setitem__(f, v)))
        out.append((f"no buffers.{field}", lambda d, f=field: d["buffers"][0].pop(f)))
    out += [
        ("extra field", lambda d: d.__setitem__("more", 1)),
        ("extra buffer field", lambda d: d["buffers"][1].__setitem__("more", 1)),
        ("a buffer more", lambda d: d["buffers"].append(d["buffers"][0])),
        ("a buffer less", lambda d: d["buffers"].pop()),
        ("buffers swapped", lambda d: d["buffers"].reverse()),
        ("size as float", lambda d: d["buffers"][0]["sizes"].__setitem__(0, 5.0)),
        ("size as bool", lambda d: d["buffers"][0]["sizes"].__setitem__(0, True)),
        ("one stride less", lambda d: d["buffers"][0]["strides"].pop()),
        ("a counter more", lambda d: d["stat_names"].append("main.bytes_in")),
        ("a counter name without a unit", lambda d: d["stat_names"].__setitem__(
            slice(None), ["x"] * len(d["stat_names"]))),
        ("openmp claimed", lambda d: d.__setitem__("uses_openmp", True)),
        ("another format", lambda d: d.__setitem__("format", 1)),
        ("another key", lambda d: d.__setitem__("key", "0" * 40)),
        ("source of another program", lambda d: d.__setitem__(
            "source", d["source"].replace("args[2]", "args[3]"))),
        ("an argument of another C type", lambda d: d.__setitem__(
            "source", d["source"].replace("(float *)args[0]", "(double *)args[0]"))),
        ("checksum missing", lambda d: d.pop("sha256")),
        ("checksum not a string", lambda d: d.__setitem__("sha256", 7)),
    ]
    return out


MUTATIONS = mutations()


def test_malformed_entries_are_misses(cache, monkeypatch):
    """Each kind of malformed entry, checksum recomputed (so that the checks of the fields,
    not the checksum, catch it) and not: load answers None, never raises."""
    program = stripe.lower(MATMUL, {"A": ((5, 7), "float32"), "B": ((7, 3), "float32")})
    config = load_config("cpu_avx2")
    final, _ = run_pipeline(program, config)
    c = emit_c(final, config.target.compute)
    key = pipeline_cache.key(program, config, True)
    pipeline_cache.store(key, c)
    path = pipeline_cache._entry(cache, key)
    good = path.read_text()
    assert pipeline_cache.load(key, program) == c
    for what, change in MUTATIONS:
        for checksum in (True, False):
            path.write_text(good)
            rewrite(path, change, checksum)
            if json.loads(path.read_text()) == json.loads(good):
                continue  # the "wrong" value is this entry's own
            assert pipeline_cache.load(key, program) is None, (what, checksum)
    for text in ("", "not json", "[]", "null", DEEP, '{"a": ' * 50_000):
        path.write_text(text)
        assert pipeline_cache.load(key, program) is None
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert pipeline_cache.load(key, program) is None
    path.write_text(good)
    assert pipeline_cache.load(key, program) == c
    # an entry copied under another key's name
    other = "1" * 40
    pipeline_cache._entry(cache, other).write_text(good)
    assert pipeline_cache.load(other, program) is None
    # the same entry does not fit another program
    smaller = stripe.lower(MATMUL, {"A": ((5, 7), "float32"), "B": ((7, 2), "float32")})
    assert pipeline_cache.load(key, smaller) is None


def test_openmp_is_cross_checked_with_the_source(cache):
    """A threaded program (cpu_avx2 shares a large matmul between its cores) keeps its
    OpenMP flag; an entry that says otherwise is a miss."""
    program = stripe.lower(MATMUL, {"A": ((192, 160), "float32"), "B": ((160, 256), "float32")})
    config = load_config("cpu_avx2")
    c = emit_c(run_pipeline(program, config)[0], config.target.compute)
    assert c.uses_openmp
    key = pipeline_cache.key(program, config, True)
    pipeline_cache.store(key, c)
    assert pipeline_cache.load(key, program) == c
    rewrite(pipeline_cache._entry(cache, key), lambda d: d.__setitem__("uses_openmp", False))
    assert pipeline_cache.load(key, program) is None


def test_an_unwritable_pipeline_cache_only_costs_the_passes(tmp_path, monkeypatch, rng):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("STRIPE_CACHE_DIR", str(blocker))
    monkeypatch.setattr(build_mod, "_loaded", {})
    monkeypatch.setattr(build_mod, "_private", None)
    x = matmul_inputs(rng)
    with pytest.warns(RuntimeWarning, match="cannot be used"):
        prog = stripe.compile(MATMUL, x, target="cpu_generic")
    np.testing.assert_allclose(prog(**x)["C"], x["A"] @ x["B"], rtol=1e-5, atol=1e-5)
    assert blocker.read_text() == ""


# the build cache: faults -------------------------------------------------------------------


def run_module(module: Any) -> int:
    return int(module.lib.stripe_run(module.ffi.new("void *[1]")))


@pytest.mark.parametrize("kind", ["a file", "under a file"])
def test_a_cache_path_that_is_not_a_directory_falls_back(tmp_path, monkeypatch, kind):
    blocker = tmp_path / "a_file"
    blocker.write_text("keep me")
    target = blocker if kind == "a file" else blocker / "sub"
    monkeypatch.setenv("STRIPE_CACHE_DIR", str(target))
    monkeypatch.setattr(build_mod, "_loaded", {})
    monkeypatch.setattr(build_mod, "_private", None)
    with pytest.warns(RuntimeWarning, match=f"the stripe cache {target} cannot be used"):
        assert run_module(build_mod.build(tiny(11))) == 11
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once
        assert run_module(build_mod.build(tiny(12))) == 12
    assert blocker.read_text() == "keep me"


def test_a_read_only_cache_that_holds_the_program_serves_it(cache, rng):
    """A filled cache that this process cannot write (simulated: root writes anywhere):
    its modules and pipelines are used without a warning; a new program is built into
    the private cache, with one."""
    x = matmul_inputs(rng)
    pipeline_cache._code_hash.cache_clear()  # the key the subprocess computes
    stripe.compile(MATMUL, x, target="cpu_generic")
    build_mod.build(tiny(61))
    code = textwrap.dedent(f"""
        import warnings
        import numpy as np
        import stripe, stripe.codegen.build as b, stripe.compiler as c
        b._writable = lambda root: "Read-only file system"
        runs = []
        real = c.run_pipeline
        c.run_pipeline = lambda *a, **k: runs.append(1) or real(*a, **k)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            m = b.build({tiny(61)!r})
            x = {{"A": np.ones((5, 7), np.float32), "B": np.ones((7, 3), np.float32)}}
            stripe.compile({MATMUL!r}, x, target="cpu_generic")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            n = b.build({tiny(62)!r})
        print(b.build_count, len(runs), m.lib.stripe_run(m.ffi.new("void *[1]")),
              n.lib.stripe_run(n.ffi.new("void *[1]")), len(caught))
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "STRIPE_CACHE_DIR": str(cache)}, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["1", "0", "61", "62", "1"]


def test_no_writable_directory_at_all_is_a_clear_error(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("STRIPE_CACHE_DIR", str(blocker))
    monkeypatch.setattr(build_mod, "_loaded", {})
    monkeypatch.setattr(build_mod, "_private", None)
    monkeypatch.setattr(tempfile, "tempdir", str(blocker))
    with pytest.warns(RuntimeWarning), pytest.raises(StripeError, match="can be written"):
        build_mod.build(tiny(14))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_cache_falls_back(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    monkeypatch.setenv("STRIPE_CACHE_DIR", str(ro))
    monkeypatch.setattr(build_mod, "_loaded", {})
    try:
        with pytest.warns(RuntimeWarning, match="cannot be used"):
            assert run_module(build_mod.build(tiny(13))) == 13
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)


def full_disk(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rename into ``cache`` and every file written there fails as on a full disk."""
    real_replace, real_write = os.replace, Path.write_text

    def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if Path(dst).parent == cache:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        real_replace(src, dst, *args, **kwargs)

    def write_text(self: Path, *args: Any, **kwargs: Any) -> int:
        if cache in self.parents:
            Path.open(self, "w").close()  # the disk takes the name, not the bytes
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(Path, "write_text", write_text)


def test_a_full_disk_falls_back_and_leaves_nothing_behind(cache, monkeypatch):
    cache.mkdir()
    full_disk(cache, monkeypatch)
    with pytest.warns(RuntimeWarning, match="No space left on device"):
        assert run_module(build_mod.build(tiny(21))) == 21
    with pytest.raises(build_mod.CompileError) as e:
        build_mod.build("int stripe_run(void **args) { not C; }")
    kept = Path(e.value.c_path)
    assert kept.read_text().startswith("int stripe_run") and cache not in kept.parents
    assert not [p for p in cache.iterdir() if p.suffix != ".lock"]


def test_a_failed_write_of_the_kept_source_leaves_no_empty_file(cache, monkeypatch):
    cache.mkdir()
    real_write = Path.write_text

    def write_text(self: Path, *args: Any, **kwargs: Any) -> int:
        if self.parent.parent == cache and self.name == "failed":
            Path.open(self, "w").close()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    with pytest.raises(build_mod.CompileError) as e:
        build_mod.build("int stripe_run(void **args) { not C either; }")
    assert Path(e.value.c_path).read_text().startswith("int stripe_run")
    assert not list(cache.glob("*.failed.c"))


def test_a_rebuilt_module_is_loaded_under_a_new_name(cache, tmp_path):
    """A module file the loader accepts but that is not the module (here a shared library
    without its init function, its hash recorded): the import fails, the rebuild gets a new
    name (the loader would give the same path back), and a new process loads that one."""
    source = tiny(31)
    key = build_mod.cache_key(source, build_mod.BASE_FLAGS)
    name = f"_stripe_{key}"
    cache.mkdir()
    so = cache / f"{name}{build_mod._suffix()}"
    lib_c = tmp_path / "other.c"
    lib_c.write_text("int other_symbol = 1;\n")
    subprocess.run([build_mod._compiler(), "-shared", "-fPIC", str(lib_c), "-o", str(so)],
                   check=True)
    (cache / f"{name}.sha256").write_text(hashlib.sha256(so.read_bytes()).hexdigest())
    before = build_mod.build_count
    module = build_mod.build(source)
    assert build_mod.build_count == before + 1 and run_module(module) == 31
    record = (cache / f"{name}.sha256").read_text().split()
    assert len(record) == 2 and record[1] != name and module.__name__ == record[1]
    assert not so.exists()  # the entry's old file is gone
    code = textwrap.dedent(f"""
        import stripe.codegen.build as b
        m = b.build({source!r})
        print(b.build_count, m.lib.stripe_run(m.ffi.new("void *[1]")))
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "STRIPE_CACHE_DIR": str(cache)}, check=True)
    assert out.stdout.split() == ["0", "31"]


# the build cache: concurrency --------------------------------------------------------------


BUILDER = """
import os, random, sys, time
import stripe.codegen.build as b
go, values = sys.argv[1], [int(v) for v in sys.argv[2:]]
random.Random(os.getpid()).shuffle(values)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
for v in values:
    m = b.build({tiny!r}.replace("VALUE", str(v)))
    assert m.lib.stripe_run(m.ffi.new("void *[1]")) == v
print("ok")
"""


def test_processes_building_the_same_programs_run_the_compiler_once_each(cache, tmp_path):
    """4 processes, 3 programs, an empty cache: 3 compiler runs in all (counted by every
    process in STRIPE_BUILD_LOG), every process gets working modules."""
    log = tmp_path / "builds.log"
    script = BUILDER.format(tiny=tiny(0).replace("return 0", "return VALUE"))
    env = {**os.environ, "STRIPE_CACHE_DIR": str(cache), "STRIPE_BUILD_LOG": str(log)}
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", script, str(go), "41", "42", "43"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    for p in procs:  # all started: then they build at once
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    go.touch()
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0 and out.strip() == "ok", err
    lines = log.read_text().splitlines()
    assert len(lines) == 3 and len({line.split()[1] for line in lines}) == 3
    assert not [p for p in cache.iterdir() if ".tmp." in p.name]


def slow(value: int) -> str:
    """A program for ``build`` whose compile takes a moment (600 functions)."""
    return tiny(value) + "".join(f"double f{k}(double x) {{ return x * {k} + {k}.5 / (x + 1); }}\n"
                                 for k in range(600))


def test_a_build_killed_midway_leaves_the_next_one_clean(cache, tmp_path):
    """kill -9 of a process while its compiler runs: its temporary folder is removed and
    its lock released by the next build, which succeeds."""
    cache.mkdir()
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "import stripe.codegen.build as b\nfrom test_cache import slow\nb.build(slow(51))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                            env={**os.environ, "STRIPE_CACHE_DIR": str(cache)})
    try:
        deadline = time.time() + 120
        while not [p for p in cache.iterdir() if ".tmp." in p.name]:
            assert time.time() < deadline and proc.poll() is None, "no build started"
            time.sleep(0.05)
        time.sleep(0.3)  # the compiler is running
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert [p for p in cache.iterdir() if ".tmp." in p.name]  # left behind
        assert run_module(build_mod.build(slow(51))) == 51  # its lock is free
        assert not [p for p in cache.iterdir() if ".tmp." in p.name]
    finally:
        # the killed process's compiler finishes on its own: wait for its session to end
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)


def test_stale_folders_of_other_hosts_are_removed_only_when_old(cache):
    cache.mkdir()
    mine_dead = cache / f"_stripe_ab.tmp.{build_mod._host()}.999999999.x1"
    other_new = cache / "_stripe_ab.tmp.otherhost.1.x2"
    other_old = cache / "_stripe_ab.tmp.otherhost.1.x3"
    alive = cache / f"_stripe_ab.tmp.{build_mod._host()}.{os.getpid()}.x4"
    for d in (mine_dead, other_new, other_old, alive):
        d.mkdir()
    old = time.time() - build_mod.STALE_SECONDS - 10
    os.utime(other_old, (old, old))
    removed = set(build_mod.clean_stale(cache))
    assert removed == {mine_dead, other_old}
    assert other_new.exists() and alive.exists()
