"""Hostile config files: paths that are not configs, special files, oversized and binary
files, huge numbers, deep nesting, long ``extends`` chains, alias bombs, and a seeded mutation
fuzzer over the shipped configs. Every outcome is a Config or a ConfigError naming the file."""

from __future__ import annotations

import copy
import os
import random
import re
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stripe import config as config_module
from stripe.config import (
    CONFIG_KEYS,
    MAX_EXTENDS,
    MAX_UNITS,
    Config,
    ConfigError,
    list_configs,
    load_config,
    read_config,
)
from stripe.errors import StripeError
from stripe.limits import INT_MAX, INT_MIN
from stripe.yamlread import MAX_FILE_BYTES, MAX_NESTING, MAX_SHOWN, MAX_VALUES

HWCONFIGS = Path(config_module.__file__).resolve().parent.parent / "hwconfigs"
SECRET = "s3cr3t-TOKEN-do-not-print"
RANGE = f"{INT_MIN} .. {INT_MAX}"


def write(folder: Path, text: str | bytes, name: str = "x.yaml") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Fail (instead of hanging the run) when the body takes longer than ``seconds``."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"took longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def refused(target: str | Path, path: str | Path | None = None,
            line: int | None = None) -> ConfigError:
    """The ConfigError of loading ``target``, checked to name ``path`` (and ``line``)."""
    with time_limit(30), pytest.raises(ConfigError) as err:
        load_config(target)
    e = err.value
    assert SECRET not in str(e)
    if path is not None:
        assert e.path == str(path) and str(path) in str(e)
    if line is not None:
        assert e.line == line, str(e)
    return e


# paths that are not configs ------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    f"{SECRET}\n",                                  # a plain string
    f"password: {SECRET}\nuser: root\n",            # a mapping without config keys
    f"- {SECRET}\n- two\n",                         # a list
    f"root:x:0:0:{SECRET}:/root:/bin/bash\n",       # the shape of a password file
    f"{SECRET}: [\n",                               # not even YAML
])
def test_a_file_that_is_not_a_config_is_not_quoted(tmp_path: Path, text: str):
    path = write(tmp_path, text, "secret.yaml")
    e = refused(path, path)
    assert e.line is not None
    child = write(tmp_path, "target: t\nextends: secret.yaml\n", "child.yaml")
    e = refused(child, path)


def test_the_password_file_is_not_quoted(tmp_path: Path):
    passwd = Path("/etc/passwd")
    if not passwd.is_file():
        pytest.skip("no /etc/passwd")
    first = passwd.read_text().splitlines()[0]
    e = refused(passwd, passwd)
    assert first not in str(e) and "not a config file" in str(e)
    # extends takes shipped names and .yaml paths only; a link with that suffix is read but
    # not quoted
    e = refused(write(tmp_path, "target: t\nextends: /etc/passwd\n"), tmp_path / "x.yaml", 2)
    assert "unknown config '/etc/passwd'" in str(e)
    (tmp_path / "passwd.yaml").symlink_to(passwd)
    e = refused(write(tmp_path, "target: t\nextends: passwd.yaml\n"), tmp_path / "passwd.yaml")
    assert first not in str(e) and "not a config file" in str(e)


def test_values_are_quoted_only_as_short_excerpts(tmp_path: Path):
    long = "y" * 500
    e = refused(write(tmp_path, f"target: {long}\ncompute: {long}\n"), None, 2)
    assert long[:MAX_SHOWN] not in str(e) and "..." in str(e)
    e = refused(write(tmp_path, f"target: t\n{long}: 1\n"), None, 2)
    assert long[:MAX_SHOWN] not in str(e) and set(CONFIG_KEYS) == set(e.choices)
    # a mapping or a list as a key is named by its kind, not printed
    e = refused(write(tmp_path, f"target: t\n? [{long}]\n: 1\n"), None, 2)
    assert "a key must be a string, got a list" in str(e) and "Node" not in str(e)


# where extends looks ---------------------------------------------------------------------------


def test_extends_resolves_next_to_the_config_not_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    write(tmp_path / "cfg", "target: near\n", "base.yaml")
    write(tmp_path / "common", "target: common\n", "shared.yaml")
    child = write(tmp_path / "cfg", "target: c\nextends: base.yaml\n", "child.yaml")
    up = write(tmp_path / "cfg", "target: c\nextends: ../common/shared.yaml\n", "up.yaml")
    write(tmp_path / "cwd", "target: wrong\n", "base.yaml")
    monkeypatch.chdir(tmp_path / "cwd")
    assert read_config(child).extends == (str(tmp_path / "cfg" / "base.yaml"),)
    assert read_config(up).extends == (str(tmp_path / "common" / "shared.yaml"),)
    # a missing parent is reported at the extends line even when the working directory has one
    e = refused(write(tmp_path / "cfg", "target: c\nextends: absent.yaml\n", "bad.yaml"),
                tmp_path / "cfg" / "bad.yaml", 2)
    write(tmp_path / "cwd", "target: wrong\n", "absent.yaml")
    assert "does not exist" in str(e)
    # a shipped name wins over a file of the same name in either folder
    write(tmp_path / "cwd", "target: wrong\n", "cpu_generic.yaml")
    named = write(tmp_path / "cfg", "target: c\nextends: cpu_generic\n", "named.yaml")
    assert load_config(named).extends[0].endswith("cpu_generic.yaml")
    assert read_config(named).extends != (str(tmp_path / "cwd" / "cpu_generic.yaml"),)


def test_a_shipped_config_extends_only_shipped_files(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    write(tmp_path, "target: wrong\n", "other.yaml")
    monkeypatch.chdir(tmp_path)
    shipped = config_module._packaged_source("cpu_avx2", "cpu_avx2.yaml")
    with pytest.raises(ConfigError, match="names no shipped config file") as err:
        config_module._locate("other.yaml", shipped, ("cpu_avx2.yaml", 3))
    assert err.value.line == 3 and "cpu_generic" in err.value.choices
    assert config_module._locate("cpu_generic.yaml", shipped, ("", 3)).name == "cpu_generic"


def test_special_files_are_refused(tmp_path: Path):
    cases = {"a directory": tmp_path / "dir.yaml"}
    (tmp_path / "dir.yaml").mkdir()
    os.mkfifo(tmp_path / "fifo.yaml")  # opening it for reading would block
    cases["a FIFO"] = tmp_path / "fifo.yaml"
    sock = socket.socket(socket.AF_UNIX)
    sock_path = tmp_path / "sock.yaml"
    try:
        sock.bind(str(sock_path))
        cases["a socket"] = sock_path
        for kind, path in cases.items():
            e = refused(path, path)
            assert kind in str(e)
            child = write(tmp_path, f"target: t\nextends: {path.name}\n", "child.yaml")
            e = refused(child, child, 2)
            assert kind in str(e)
    finally:
        sock.close()


@pytest.mark.parametrize("special", ["/proc/self/environ", "/proc/self/status", "/dev/zero",
                                     "/dev/null", "/sys/kernel/mm/transparent_hugepage/enabled",
                                     "/dev/stdin"])
def test_kernel_and_device_files_are_refused(tmp_path: Path, special: str):
    if not os.path.exists(special):
        pytest.skip(f"no {special}")
    e = refused(special, special)
    assert "kernel and device files" in str(e) or "not a regular file" in str(e)
    (tmp_path / "link.yaml").symlink_to(special)
    e = refused(write(tmp_path, "target: t\nextends: link.yaml\n"), tmp_path / "x.yaml", 2)
    assert "link.yaml" in str(e)


@pytest.mark.parametrize("target, message", [
    ("x\0.yaml", "NUL character"),
    ("\ud800.yaml", "is not a valid path"),
    ("a" * 5000 + ".yaml", "cannot be read"),
    ("missing/x.yaml", "does not exist"),
])
def test_paths_the_file_system_refuses(target: str, message: str):
    e = refused(target)
    assert message in str(e)


def test_long_paths_are_shown_by_their_end(tmp_path: Path):
    name = "d" * 3000 + "/base.yaml"
    e = refused(write(tmp_path, f"target: t\nextends: {name}\n"), tmp_path / "x.yaml", 2)
    assert "base.yaml' cannot be read" in str(e) and len(str(e)) < 400


@pytest.mark.parametrize("target", [None, b"cpu_avx2", 3])
def test_the_target_argument_is_a_name_or_a_path(target: object):
    with pytest.raises(TypeError, match="target must be a config name or a path"):
        load_config(target)  # type: ignore[arg-type]


# the bytes of a file -------------------------------------------------------------------------


@pytest.mark.parametrize("data, line, message", [
    (b"target: t\ncompute: {units: 2}\x00\n", 2, "NUL byte"),
    (b"target: t\n# caf\xe9\n", 2, "not valid UTF-8"),
    (b"target: t\n\n\ncflags: [\xff\xfe]\n", 4, "not valid UTF-8"),
    (b"target: t\ncompute: {units: \x07}\n", 2, "character #x0007 is not allowed"),
    ("# \u00e9\u00e9\u00e9\u00e9\ntarget: t\n# \u00e9\u00e9\n\x07\n".encode(), 4,
     "character #x0007 is not allowed"),
    (b"target: t\n\tcompute: {units: 2}\n", 2, "tab"),
])
def test_binary_and_control_bytes(tmp_path: Path, data: bytes, line: int, message: str):
    path = write(tmp_path, data)
    e = refused(path, path, line)
    assert message in str(e)
    # the same inside a parent: the error names the parent
    child = write(tmp_path, "target: c\nextends: x.yaml\n", "child.yaml")
    e = refused(child, path, line)


def test_file_size_limit(tmp_path: Path):
    body = "target: t\n"
    ok = write(tmp_path, body + "#" * (MAX_FILE_BYTES - len(body) - 1) + "\n")
    assert ok.stat().st_size == MAX_FILE_BYTES
    assert load_config(ok).target.name == "t"
    big = write(tmp_path, body + "#" * MAX_FILE_BYTES + "\n", "big.yaml")
    e = refused(big, big)
    assert f"limit of {MAX_FILE_BYTES} bytes" in str(e)


# numbers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, line", [
    ("target: t\ncompute: {units: 9223372036854775808}\n", 2),
    ("target: t\ncompute: {units: -9223372036854775809}\n", 2),
    ("target: t\ncompute: {vector_width: 0x8000000000000000}\n", 2),
    ("target: t\nmemories:\n  - {name: L1, size: 64, banks: 99999999999999999999999}\n", 3),
    ("target: t\nmemories:\n  - {name: L1, line: 1" + "0" * 5000 + ", size: 1}\n", 3),
    ("target: t\ncompute: {units: 1" + ":59" * 200_000 + "}\n", 2),  # base 60
    ("target: t\nextends: cpu_generic\npasses:\n  - name: cleanup\n    options: {x: "
     + "9" * 30 + "}\n", 5),
    ("target: t\nextends: examples/paper_fig4\npasses:\n  - name: autotile\n"
     "    options: {input_cost: 1" + "0" * 400 + "}\n", 5),
])
def test_integers_beyond_64_bits(tmp_path: Path, text: str, line: int):
    path = write(tmp_path, text)
    start = time.perf_counter()
    e = refused(path, path, line)
    assert time.perf_counter() - start < 5
    assert e.choices == (RANGE,) and f"valid range: {RANGE}" in str(e)


@pytest.mark.parametrize("size", ["9223372036854775808", "8589934592GiB",
                                  "99999999999999999999999999999 KiB", "1" * 5000 + "B"])
def test_sizes_beyond_64_bits(tmp_path: Path, size: str):
    path = write(tmp_path, f"target: t\nmemories:\n  - {{name: L1, size: '{size}'}}\n")
    e = refused(path, path, 3)
    assert f"1 .. {INT_MAX}" in e.choices


@pytest.mark.parametrize("size", ["0KiB", "000 MiB", "0", "-1"])
def test_sizes_below_one_byte(tmp_path: Path, size: str):
    path = write(tmp_path, f"target: t\nmemories:\n  - {{name: L1, size: {size}}}\n")
    e = refused(path, path, 3)
    assert f"1 .. {INT_MAX}" in e.choices or "not a size" in str(e)


def test_the_largest_integers_load(tmp_path: Path):
    cfg = load_config(write(tmp_path, f"target: t\nmemories:\n  - {{name: L1, size: {INT_MAX}, "
                                      f"banks: {INT_MAX}}}\ncompute: {{prefetch_ahead: "
                                      f"{INT_MAX}, units: {MAX_UNITS}}}\n"))
    assert cfg.memory("L1").size == INT_MAX and cfg.compute.prefetch_ahead == INT_MAX
    assert cfg.compute.units == MAX_UNITS


@pytest.mark.parametrize("units", [MAX_UNITS + 1, INT_MAX])
def test_compute_units_are_bounded(tmp_path: Path, units: int):
    # autotile's balance term plans per unit: 2**63 - 1 units was a MemoryError in a pass
    path = write(tmp_path, f"target: t\nextends: cpu_avx2\ncompute: {{units: {units}}}\n")
    e = refused(path, path, 3)
    assert e.choices == (f"1 .. {MAX_UNITS}",)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "1.0e999"])
def test_floats_must_be_finite(tmp_path: Path, value: str):
    path = write(tmp_path, "target: t\nextends: examples/paper_fig4\npasses:\n"
                           f"  - name: autotile\n    options: {{input_cost: {value}}}\n")
    e = refused(path, path, 5)
    assert "finite" in str(e)


@pytest.mark.parametrize("value, message", [
    ("!!int abc", "bad value"),
    ("2001-02-30", "bad value"),
    ("!!float abc", "bad value"),
    ("!!binary AAAA", "must be an integer, got bytes"),
    ("!custom x", "bad value"),
    ("!!python/object:os.system x", "bad value"),
])
def test_values_no_constructor_reads(tmp_path: Path, value: str, message: str):
    path = write(tmp_path, f"target: t\ncompute:\n  units: {value}\n")
    e = refused(path, path, 3)
    assert message in str(e)


# structure: nesting, aliases, keys -------------------------------------------------------------


def _options(text: str) -> str:
    return ("target: t\nextends: cpu_avx2\npasses:\n  - name: microkernel\n"
            f"    options: {{stencils: {text}}}\n")


@pytest.mark.parametrize("depth", [MAX_NESTING, 500, 990, 5000, 100_000])
@pytest.mark.parametrize("kind", ["list", "mapping", "block"])
def test_deep_nesting(tmp_path: Path, depth: int, kind: str):
    if kind == "list":
        text = _options("[" * depth + "]" * depth)
    elif kind == "mapping":
        text = _options("{a: " * depth + "1" + "}" * depth)
    else:
        text = "target: t\nextends: cpu_generic\npasses:\n  - " + "- " * depth + "x\n"
    path = write(tmp_path, text)
    e = refused(path, path, 5 if kind != "block" else 4)
    assert f"more than {MAX_NESTING} levels" in str(e) or "maximum nesting depth" in str(e)


def test_nesting_up_to_the_limit_reaches_the_pass(tmp_path: Path):
    # levels: the top mapping, passes, the entry, options, then the stencils' lists
    inner = MAX_NESTING - 4
    path = write(tmp_path, _options("[" * inner + "]" * inner))
    e = refused(path, path, 5)
    assert "must be a mapping" in str(e)
    path = write(tmp_path, _options("[" * (inner + 1) + "]" * (inner + 1)))
    e = refused(path, path, 5)
    assert f"more than {MAX_NESTING} levels" in str(e)


def test_alias_expansion_is_bounded(tmp_path: Path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    body = "".join(f"      {line}\n" for line in lines)
    path = write(tmp_path, "target: t\nextends: cpu_generic\npasses:\n  - name: cleanup\n"
                           f"    options:\n{body}")
    start = time.perf_counter()
    e = refused(path, path)
    assert time.perf_counter() - start < 5
    assert f"more than {MAX_VALUES} values" in str(e) and e.line is not None


def test_a_self_referencing_alias(tmp_path: Path):
    path = write(tmp_path, "target: t\nextends: cpu_generic\npasses:\n  - name: cleanup\n"
                           "    options: {reqs: &a [*a]}\n")
    e = refused(path, path)
    assert e.line is not None


@pytest.mark.parametrize("text, line, message", [
    ("target: t\n1: 2\n", 2, "a key must be a string, got int 1"),
    ("target: t\nnull: 2\n", 2, "a key must be a string, got null"),
    ("target: t\ncompute: {1: 2}\n", 2, "a key in compute must be a string"),
    ("target: t\nmemories:\n  - {name: L1, size: 1, true: 2}\n", 3, "must be a string"),
    ("target: t\nextends: cpu_generic\npasses:\n  - name: cleanup\n    options: {3: x}\n", 5,
     "a key must be a string, got int 3"),
    ("target: t\ntarget: u\n", 2, "duplicate key 'target'"),
    ("target: t\ncompute: {units: 1, units: 2}\n", 2, "duplicate key 'units'"),
    ("target: t\nextends: cpu_generic\npasses:\n  - name: cleanup\n    options:\n"
     "      reqs: [a]\n      reqs: [b]\n", 7, "duplicate key 'reqs'"),
    ("base: &b {units: 2}\ntarget: t\ncompute:\n  <<: *b\n", 1, "unknown key 'base'"),
    ("target: t\ncompute:\n  <<: {units: 2}\n", 3, "merge keys"),
])
def test_keys(tmp_path: Path, text: str, line: int, message: str):
    path = write(tmp_path, text)
    e = refused(path, path, line)
    assert message in str(e)


def test_a_large_file_is_refused_at_the_value_limit(tmp_path: Path):
    text = "target: t\nx:\n" + "- a\n" * ((MAX_FILE_BYTES - 20) // 4)
    path = write(tmp_path, text)
    e = refused(path, path)
    assert f"more than {MAX_VALUES} values" in str(e) and e.line is not None


def _many_passes(folder: Path, count: int) -> Path:
    entries = "".join(f"  - {{name: p{i}, type: cleanup, after: p{i // 2}}}\n"
                      for i in range(1, count))
    return write(folder, f"target: t\npasses:\n  - {{name: p0, type: cleanup}}\n{entries}",
                 f"p{count}.yaml")


def test_loading_time_grows_linearly_with_the_entries(tmp_path: Path):
    def cpu_seconds(count: int) -> float:
        path = _many_passes(tmp_path, count)
        start = time.process_time()
        cfg = read_config(path)
        assert len(cfg.passes) == count and cfg.passes[0].name == "p0"
        return time.process_time() - start

    # Both files are past the size at which the reader scans before composing, so that
    # both take the same path; the best of three runs each, since a shared machine's
    # timings wander. Linear: about 4 times as long; quadratic (a search of the entries per
    # entry, which took seconds at this size): 16 times.
    small = min(cpu_seconds(2000) for _ in range(3))
    large = min(cpu_seconds(8000) for _ in range(3))
    assert large < 10 * small + 0.5, (small, large)


# extends chains --------------------------------------------------------------------------------


def _chain(folder: Path, length: int) -> Path:
    """``c0.yaml`` extends ``c1.yaml`` ... extends ``c<length-1>.yaml`` (no parent)."""
    for i in range(length):
        parent = f"extends: c{i + 1}.yaml\n" if i + 1 < length else ""
        write(folder, f"target: t{i}\n{parent}", f"c{i}.yaml")
    return folder / "c0.yaml"


def test_extends_chain_limit(tmp_path: Path):
    longest = _chain(tmp_path / "ok", MAX_EXTENDS + 1)
    assert len(read_config(longest).extends) == MAX_EXTENDS
    deep = _chain(tmp_path / "deep", 976)
    e = refused(deep, tmp_path / "deep" / f"c{MAX_EXTENDS}.yaml", 2)
    assert f"longer than {MAX_EXTENDS} files" in str(e)
    assert "c0.yaml -> " in str(e) and f"c{MAX_EXTENDS + 1}.yaml" in str(e)


def test_extends_cycle_through_other_spellings(tmp_path: Path):
    write(tmp_path / "d", "target: a\nextends: ./b.yaml\n", "a.yaml")
    write(tmp_path / "d", "target: b\nextends: ../d/a.yaml\n", "b.yaml")
    e = refused(tmp_path / "d" / "a.yaml", tmp_path / "d" / "b.yaml", 2)
    assert "extends cycle" in str(e)
    write(tmp_path, "target: s\nextends: s.yaml\n", "s.yaml")
    assert "extends cycle" in str(refused(tmp_path / "s.yaml", tmp_path / "s.yaml", 2))


# the mutation fuzzer ---------------------------------------------------------------------------

SHIPPED = sorted([*HWCONFIGS.glob("*.yaml"), *HWCONFIGS.glob("examples/*.yaml")])
NUMBERS = ["9223372036854775807", "9223372036854775808", "-9223372036854775809", "-1", "0",
           "1e400", "1.5", "-0.0", ".nan", ".inf", "1" * 5000, "0x" + "f" * 40, "1:2:3:4:5",
           "00000000000000000000000000000000000000000000000000000000000000000000000001"]
SNIPPETS = ["&a ", "*a", "*zz", "!!int x", "\t", "{", "[", "]", "}", "<<: ", "? ", "\x00",
            "\x07", ".nan", "~", "'", '"', "- ", ": ", "!!binary x", "\xff", "#", "\\",
            "extends: x.yaml", "extends: /proc/self/status", "extends: m.yaml", "&b [*b]"]
KEYS = [*CONFIG_KEYS, "name", "type", "options", "size", "line", "banks", "units", "reqs",
        "stencils", "idxs", "after", "before", "1", "null", "true", "<<", "x" * 100]


def mutate(text: str, rng: random.Random) -> bytes:
    """``text`` with 1 to 4 random edits: byte flips, line deletions, duplications and
    swaps, numbers replaced by huge, negative or float ones, keys renamed, snippets of YAML
    syntax inserted, the file cut short."""
    for _ in range(rng.randint(1, 4)):
        lines = text.split("\n")
        op = rng.randrange(8)
        if op == 0 and text:
            pos = rng.randrange(len(text))
            text = text[:pos] + chr(rng.randrange(256)) + text[pos + 1:]
        elif op == 1:
            del lines[rng.randrange(len(lines))]
            text = "\n".join(lines)
        elif op == 2:
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            text = "\n".join(lines)
        elif op == 3:
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        elif op == 4:
            spans = [m.span() for m in re.finditer(r"-?\d+(\.\d+)?", text)]
            if spans:
                a, b = rng.choice(spans)
                text = text[:a] + rng.choice(NUMBERS) + text[b:]
        elif op == 5:
            spans = [m.span(1) for m in re.finditer(r"(\w+):", text)]
            if spans:
                a, b = rng.choice(spans)
                text = text[:a] + rng.choice(KEYS) + text[b:]
        elif op == 6:
            pos = rng.randrange(len(text) + 1)
            text = text[:pos] + rng.choice(SNIPPETS) + text[pos:]
        else:
            text = text[:rng.randrange(len(text) + 1)]
    return text.encode("utf-8", "surrogateescape") if rng.random() < 0.9 else \
        text.encode("latin-1", "replace")


def check_mutant(folder: Path, data: bytes) -> Config | ConfigError:
    """Load ``data`` as ``folder/m.yaml``: a Config, or a ConfigError naming a file; any
    other exception, or more than 10 s, fails."""
    path = write(folder, data, "m.yaml")
    start = time.perf_counter()
    try:
        with time_limit(20):
            result: Config | ConfigError = load_config(path)
    except ConfigError as e:
        assert e.path, e
        result = e
    elapsed = time.perf_counter() - start
    assert elapsed < 10, f"loading took {elapsed:.1f} s"
    return result


def test_mutants_of_shipped_configs_load_or_fail_cleanly(tmp_path_factory:
                                                         pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("mutants")
    texts = [p.read_text() for p in SHIPPED]
    assert {p.stem for p in SHIPPED} >= {n.split("/")[-1] for n in list_configs()}
    examples = 3000 if settings._current_profile == "long" else 200

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, 2**32 - 1))
    def run(seed: int) -> None:
        rng = random.Random(seed)
        check_mutant(folder, mutate(rng.choice(texts), rng))

    run()


STRUCT_KEYS = ["name", "type", "size", "outs", "ins", "idxs", "startup_cost", "point_cost",
               "reqs", "options", "after", "before", "x"]
STRUCT_SCALARS: list[object] = [
    0, -1, 1, 2, 3, 7, 16, 64, 2**31, 2**62, INT_MAX, INT_MIN, 2**64, 0.0, -0.0, 0.5, -1.5,
    1e300, 5e-324, float("inf"), float("nan"), True, False, None, "", "x", "main", "kernel",
    "contraction", "L1", "L2", "CPU", "m", "n", "k", "-O3", "a" * 200, "cleanup", "autotile",
    "in", "out"]


def _random_value(rng: random.Random, depth: int = 0) -> object:
    r = rng.randrange(10)
    if r < 2 and depth < 4:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if r < 4 and depth < 4:
        return {rng.choice(STRUCT_KEYS): _random_value(rng, depth + 1)
                for _ in range(rng.randrange(4))}
    return rng.choice(STRUCT_SCALARS)


def mutate_structure(data: object, rng: random.Random) -> str:
    """A shipped config's YAML data with 1 to 3 values replaced, removed, duplicated or
    added at random places (well-formed YAML with wrong values), as text."""
    data = copy.deepcopy(data)
    for _ in range(rng.randint(1, 3)):
        places: list[tuple[Any, Any]] = []
        stack: list[object] = [data]
        while stack:
            node = stack.pop()
            items = node.items() if isinstance(node, dict) else \
                enumerate(node) if isinstance(node, list) else ()
            for key, value in items:
                places.append((node, key))
                stack.append(value)
        parent, key = rng.choice(places)
        op = rng.randrange(4)
        if op == 1 and isinstance(parent, dict):
            del parent[key]
        elif op == 2 and isinstance(parent[key], list) and parent[key]:
            parent[key].append(copy.deepcopy(rng.choice(parent[key])))
        elif op == 3 and isinstance(parent[key], dict):
            parent[key][rng.choice(STRUCT_KEYS)] = _random_value(rng)
        else:
            parent[key] = _random_value(rng)
    return yaml.safe_dump(data, sort_keys=False)


def test_wrong_values_in_shipped_configs_load_or_fail_cleanly(tmp_path_factory:
                                                              pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("structural")
    datas = [yaml.safe_load(p.read_text()) for p in SHIPPED]
    examples = 2000 if settings._current_profile == "long" else 100

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, 2**32 - 1))
    def run(seed: int) -> None:
        rng = random.Random(seed)
        check_mutant(folder, mutate_structure(rng.choice(datas), rng).encode())

    run()


def test_fixed_seeds_of_the_mutation_fuzzer(tmp_path: Path):
    """A fixed set of seeds, so that the default run always covers the same mutants too."""
    texts = [p.read_text() for p in SHIPPED]
    outcomes: dict[str, int] = {}
    for seed in range(60):
        rng = random.Random(seed)
        result = check_mutant(tmp_path, mutate(rng.choice(texts), rng))
        kind = type(result).__name__
        outcomes[kind] = outcomes.get(kind, 0) + 1
    assert outcomes.get("ConfigError", 0) > 0


def test_every_error_is_a_stripe_error():
    assert issubclass(ConfigError, StripeError)
