"""YAML hardware configs: the shipped files, extends, and one test per kind of error."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import stripe
from stripe.codegen.microkernel import AVX2
from stripe.compiler import build_settings
from stripe.config import (
    CONFIG_KEYS,
    ConfigError,
    RawOptions,
    check_option_type,
    describe_configs,
    list_configs,
    load_config,
    read_config,
)
from stripe.errors import StripeError
from stripe.passes import REGISTRY, PassInfo, cleanup, localize, option_docs
from stripe.passes.manager import describe_passes, resolve, run_pipeline
from stripe.target import DEFAULT_CACHE_LINE, HOST, Memory, Target


def write(tmp_path: Path, text: str, name: str = "x.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text.lstrip("\n"))
    return path


def error(tmp_path: Path, text: str) -> ConfigError:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.path == str(path)
    assert str(path) in str(err.value)
    return err.value


# the shipped configs -------------------------------------------------------------------------


def test_shipped_configs_load():
    assert {"cpu_generic", "cpu_avx2"} <= set(list_configs())
    for name in list_configs():
        cfg = load_config(name)
        assert cfg.name == name and cfg.target and cfg.passes
        assert all(p.type in REGISTRY for p in cfg.passes)


def test_cpu_avx2_extends_cpu_generic():
    generic, avx2 = load_config("cpu_generic"), load_config("cpu_avx2")
    assert avx2.target.name == "cpu_avx2"
    assert avx2.extends == (generic.path,)
    assert avx2.memory("L1").size == 32 * 1024
    assert avx2.memory("L2").size == 512 * 1024 and generic.memory("L2").size == 256 * 1024
    assert avx2.memory("L1").line == 64
    assert avx2.compute.vector_width == 32
    assert set(avx2.cflags) >= {"-mavx2", "-mfma"}
    # It fuses row reductions and elementwise chains before the generic pipeline localizes
    # temporaries, then runs the BLIS-like contraction pipeline, then shares kernels among
    # its cores.
    generic_names = [p.name for p in generic.passes]
    own = ["fuse_rows", "pad", "edges", "tile_l2", "pack", "hoist_copies", "fuse_epilogue",
           "localize_epilogue", "tile_l1", "microkernel", "fold_init", "threads",
           "threads_init", "threads_pad", "threads_tiles", "reorder_shares"]
    names = [p.name for p in avx2.passes]
    assert [n for n in names if n in own] == own
    assert [n for n in names if n in generic_names] == generic_names
    assert names[:2] == ["cleanup_early", "fuse_rows"]
    assert names.index("cleanup") < names.index("pad")


def test_descriptions_list_every_pass_option_and_config():
    text = describe_passes()
    for name, info in REGISTRY.items():
        assert f"\n{name}: " in "\n" + text
        for option, doc in info.option_docs.items():
            assert f"    {option}: " in text and doc.splitlines()[0] in text
    configs = describe_configs()
    for name in list_configs():
        assert f"{name}: target " in configs
    assert "cpu_avx2: target cpu_avx2 (extends cpu_generic)" in configs


def test_options_are_typed_and_defaults_filled(tmp_path: Path):
    cfg = load_config(write(tmp_path, """
target: t
memories:
  - {name: L1, size: 1 MiB}
  - {name: SRAM, size: 512, line: 32B, banks: 4}
passes:
  - name: tidy
    type: cleanup
    options: {reqs: [kernel], fold_constants: false}
  - type: localize
    options:
"""))
    tidy, loc = cfg.passes
    assert (tidy.name, tidy.type) == ("tidy", "cleanup")
    assert tidy.options == cleanup.Options(reqs=("kernel",), fold_constants=False)
    assert (loc.name, loc.options) == ("localize", localize.Options())
    assert cfg.memory("L1").size == 1 << 20
    assert (cfg.memory("SRAM").size, cfg.memory("SRAM").line, cfg.memory("SRAM").banks) == (
        512, 32, 4)
    assert tidy.line == 6 and loc.line == 9


# extends -------------------------------------------------------------------------------------

BASE = """
target: base
memories:
  - {name: L1, size: 32KiB}
  - {name: L2, size: 256KiB}
compute: {units: 4, vector_width: 16}
cflags: [-O2]
passes:
  - {name: first, type: cleanup, options: {reqs: [kernel], fold_constants: false}}
  - {name: move, type: localize}
  - {name: last, type: cleanup}
"""


def test_extends_merges_by_name(tmp_path: Path):
    write(tmp_path, BASE, "base.yaml")
    cfg = load_config(write(tmp_path, """
target: child
extends: base.yaml
memories:
  - {name: L2, size: 1MiB}
  - {name: L3, size: 8MiB}
compute: {vector_width: 32}
cflags: [-O3, -march=haswell]
passes:
  - {name: first, options: {fold_constants: true}}
  - {name: scal, type: scalarize, after: move}
  - {name: early, type: cleanup, before: first}
  - {type: scalarize}
"""))
    assert cfg.target.name == "child" and cfg.extends == (str(tmp_path / "base.yaml"),)
    assert [(m.name, m.size) for m in cfg.memories] == [
        ("L1", 32 << 10), ("L2", 1 << 20), ("L3", 8 << 20)]
    assert (cfg.compute.units, cfg.compute.vector_width) == (4, 32)
    assert cfg.cflags == ("-O3", "-march=haswell")
    assert [(p.name, p.type) for p in cfg.passes] == [
        ("early", "cleanup"), ("first", "cleanup"), ("move", "localize"),
        ("scal", "scalarize"), ("last", "cleanup"), ("scalarize", "scalarize")]
    first = cfg.passes[1]
    assert first.options == cleanup.Options(reqs=("kernel",), fold_constants=True)
    assert first.path == str(tmp_path / "x.yaml") and first.line == 9


def test_extends_a_shipped_config_by_name(tmp_path: Path):
    cfg = load_config(write(tmp_path, """
target: mine
extends: cpu_avx2
cflags: [-O2]
"""))
    assert cfg.extends[0].endswith("cpu_avx2.yaml") and cfg.extends[1].endswith(
        "cpu_generic.yaml")
    assert cfg.memory("L2").size == 512 << 10 and cfg.cflags == ("-O2",)


# the target -----------------------------------------------------------------------------------


def test_the_target_holds_the_hardware_facts():
    avx2 = load_config("cpu_avx2").target
    assert isinstance(avx2, Target) and avx2.name == "cpu_avx2"
    assert [m.name for m in avx2.memories] == ["L1", "L2"]
    assert avx2.memory("L2") == Memory("L2", 512 << 10, 64)
    assert avx2.has_memory("L1") and not avx2.has_memory("SRAM")
    with pytest.raises(KeyError):
        avx2.memory("SRAM")
    assert avx2.cache_line == 64 and avx2.units == avx2.compute.units == 2
    assert avx2.compute.vector_width == 32 and avx2.compute.kernel_chains == 8
    assert avx2.compiler_flags == avx2.cflags and "-mavx2" in avx2.cflags
    with pytest.raises(dataclasses.FrozenInstanceError):
        avx2.name = "other"  # type: ignore[misc]
    # the config's shorthands read the same object
    cfg = load_config("cpu_avx2")
    assert cfg.memories is cfg.target.memories and cfg.compute is cfg.target.compute
    assert cfg.cflags is cfg.target.cflags and cfg.memory("L1") is cfg.target.memory("L1")
    # the same file loads to an equal target (the compile cache keys on it)
    assert load_config("cpu_avx2").target == avx2 and repr(cfg.target) == repr(avx2)


def test_target_lookups_and_defaults():
    fig4 = load_config("examples/paper_fig4").target
    assert fig4.cache_line == 8 and fig4.units == 1
    assert Target("bare").cache_line == DEFAULT_CACHE_LINE == 64
    assert Target("bare").compiler_flags == ("-march=native",)
    mixed = Target("t", (Memory("A", 1024, 128), Memory("B", 64, 32)))
    assert mixed.cache_line == 32


def test_host_is_the_default_target():
    """``stripe.compile`` without a config builds for HOST: -march=native, AVX2-sized
    vectors (the back end's default SIMD unit), no memories."""
    assert HOST.name == "host" and HOST.memories == ()
    assert HOST.compiler_flags == ("-march=native",)
    assert (HOST.compute.vector_width, HOST.compute.vector_registers) == (32, 16)
    flags, vector = build_settings(HOST)
    assert flags == ("-march=native",) and vector == AVX2
    assert build_settings(load_config("cpu_avx2")) == build_settings(
        load_config("cpu_avx2").target)


# errors: one test per kind -------------------------------------------------------------------


def test_unknown_key_names_line_and_valid_keys(tmp_path: Path):
    e = error(tmp_path, """
target: t
memories: []

pases:
  - {type: cleanup}
""")
    assert e.line == 4
    assert e.choices == CONFIG_KEYS
    assert str(e) == (f"unknown key 'pases' in {e.path} line 4; valid keys: "
                      "cflags, compute, extends, memories, passes, target, units")
    assert isinstance(e, StripeError)


def test_unknown_pass_type(tmp_path: Path):
    e = error(tmp_path, """
target: t
passes:
  - {type: cleanup}
  - {type: autotiel}
""")
    assert e.line == 4 and "unknown pass type 'autotiel'" in str(e)
    assert e.choices == tuple(REGISTRY) and "valid pass types: " in str(e)


def test_unknown_option(tmp_path: Path):
    e = error(tmp_path, """
target: t
passes:
  - type: localize
    options:
      reqs: [main]
      ref_req: [tmp]
""")
    assert e.line == 6 and "unknown key 'ref_req' in the options of localize" in str(e)
    assert e.choices == ("exclude", "ref_reqs", "reqs")


@pytest.mark.parametrize("value, message", [
    ("kernel", "option 'reqs' of cleanup (list of str) must be a list, got str 'kernel'"),
    ("[kernel, 3]", "an element of option 'reqs' of cleanup must be str, got int 3"),
    ("{a: 1}", "must be a list, got a mapping"),
])
def test_wrong_option_type(tmp_path: Path, value: str, message: str):
    e = error(tmp_path, f"""
target: t
passes:
  - type: cleanup
    options: {{reqs: {value}}}
""")
    assert e.line == 4 and message in str(e)


def test_bool_is_not_an_int_and_an_int_is_not_a_bool(tmp_path: Path):
    e = error(tmp_path, """
target: t
passes:
  - {type: cleanup, options: {fold_constants: 1}}
""")
    assert e.line == 3 and "option 'fold_constants' of cleanup must be bool, got int 1" in str(e)
    e = error(tmp_path, "target: t\ncompute: {units: yes}\n")
    assert e.line == 2 and "compute units must be an integer, got bool True" in str(e)
    e = error(tmp_path, "target: t\ncompute: {prefetch_ahead: -64}\n")
    assert e.line == 2 and "compute prefetch_ahead must be >= 0" in str(e)
    e = error(tmp_path, "target: t\ncompute: {kernel_prefetch: -1}\n")
    assert e.line == 2 and "compute kernel_prefetch must be >= 0" in str(e)
    e = error(tmp_path, "target: t\ncompute: {prefetch_writes: 2}\n")
    assert e.line == 2 and "compute prefetch_writes must be <= 1" in str(e)
    e = error(tmp_path, "target: t\ncompute: {lane_chains: 0}\n")
    assert e.line == 2 and "compute lane_chains must be >= 1" in str(e)
    e = error(tmp_path, "target: t\ncompute: {lane_chains: 17}\n")
    assert e.line == 2 and "compute lane_chains must be <= 16" in str(e)
    e = error(tmp_path, "target: t\ncompute: {copy_prefetch: -1}\n")
    assert e.line == 2 and "compute copy_prefetch must be >= 0" in str(e)
    e = error(tmp_path, "target: t\ncompute: {kernel_unroll: 0}\n")
    assert e.line == 2 and "compute kernel_unroll must be >= 1" in str(e)
    e = error(tmp_path, "target: t\ncompute: {kernel_unroll: 64}\n")
    assert e.line == 2 and "compute kernel_unroll must be <= 16, got 64" in str(e)


def test_option_values_checked_by_the_pass(tmp_path: Path):
    e = error(tmp_path, """
target: t
passes:
  - {type: cleanup}
  - {name: second, type: cleanup, options: {reqs: [all, kernel]}}
""")
    assert e.line == 4 and "pass 'second' (cleanup): 'all' selects every block" in str(e)


@pytest.mark.parametrize("size", ["32KB", "32 kib", "1.5MiB", "-4", "MiB", "0", "true"])
def test_sizes_that_do_not_parse(tmp_path: Path, size: str):
    e = error(tmp_path, f"""
target: t
memories:
  - name: L1
    size: {size}
""")
    assert e.line == 4
    if size not in ("0", "-4", "true"):
        assert e.choices == ("<int>", "<int>B", "<int>KiB", "<int>MiB", "<int>GiB")


@pytest.mark.parametrize("size, value", [("32KiB", 32768), ("1 MiB", 1 << 20), ("512", 512),
                                         ("'512'", 512), ("64B", 64), ("2GiB", 2 << 30)])
def test_sizes_that_parse(tmp_path: Path, size: str, value: int):
    cfg = load_config(write(tmp_path, f"target: t\nmemories: [{{name: M, size: {size}}}]\n"))
    assert cfg.memory("M").size == value


def test_memory_needs_a_size_and_a_unique_name(tmp_path: Path):
    e = error(tmp_path, "target: t\nmemories:\n  - {name: L1}\n")
    assert e.line == 3 and "memory 'L1' needs the key 'size'" in str(e)
    e = error(tmp_path, "target: t\nmemories:\n  - {name: L1, size: 1}\n  - {name: L1, size: 2}\n")
    assert e.line == 4 and "memory 'L1' is listed twice" in str(e)


def test_yaml_syntax_error(tmp_path: Path):
    e = error(tmp_path, "target: t\npasses:\n  - {type: cleanup\n")
    assert e.line == 4 and "YAML syntax error" in str(e)


def test_missing_target_and_empty_file(tmp_path: Path):
    e = error(tmp_path, "passes: []\n")
    assert e.line == 1 and "needs the key 'target'" in str(e)
    e = error(tmp_path, "# nothing\n")
    assert e.line is None and "empty" in str(e)


def test_duplicate_pass_names(tmp_path: Path):
    e = error(tmp_path, "target: t\npasses:\n  - {type: cleanup}\n  - {type: cleanup}\n")
    assert e.line == 4 and "pass name 'cleanup' is used twice" in str(e)


def test_duplicate_keys(tmp_path: Path):
    e = error(tmp_path, "target: t\ntarget: u\n")
    assert e.line == 2 and "duplicate key 'target'" in str(e)


def test_unknown_extends(tmp_path: Path):
    e = error(tmp_path, "target: t\nextends: cpu_avx3\n")
    assert e.line == 2 and "unknown config 'cpu_avx3'" in str(e)
    assert set(list_configs()) <= set(e.choices)
    e = error(tmp_path, "target: t\nextends: missing/base.yaml\n")
    assert e.line == 2 and "does not exist" in str(e)


def test_extends_cycle(tmp_path: Path):
    write(tmp_path, "target: a\nextends: b.yaml\n", "a.yaml")
    write(tmp_path, "target: b\nextends: a.yaml\n", "b.yaml")
    with pytest.raises(ConfigError, match="extends cycle: .*a.yaml -> .*b.yaml -> .*a.yaml"):
        load_config(tmp_path / "a.yaml")


def test_override_cannot_change_the_type(tmp_path: Path):
    write(tmp_path, BASE, "base.yaml")
    e = error(tmp_path, "target: c\nextends: base.yaml\npasses:\n  - {name: move, type: cleanup}\n")
    assert e.line == 4 and "pass 'move' is a localize" in str(e)


def test_before_after_must_name_an_earlier_pass(tmp_path: Path):
    e = error(tmp_path, "target: t\npasses:\n  - {type: cleanup, after: nothing}\n")
    assert e.line == 3 and e.choices == ()
    write(tmp_path, BASE, "base.yaml")
    e = error(tmp_path, "target: c\nextends: base.yaml\npasses:\n  - {type: scalarize, "
                        "before: mvoe}\n")
    assert e.line == 4 and e.choices == ("first", "move", "last")


def test_entry_without_type(tmp_path: Path):
    e = error(tmp_path, "target: t\npasses:\n  - {name: tidy}\n")
    assert e.line == 3 and "needs 'type'" in str(e) and "cleanup" in e.choices


def test_unknown_config_name():
    with pytest.raises(ConfigError, match="unknown config 'cpu_nothing'") as err:
        load_config("cpu_nothing")
    assert "cpu_generic" in err.value.choices


# nested option types -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Dim:
    """One dimension of a test shape."""

    name: str
    """The dimension's name."""
    size: int = -1
    """Its length; -1: any."""
    strides: tuple[int, ...] = ()
    """Strides along it."""


@dataclasses.dataclass(frozen=True)
class Shape:
    """A test shape: a cost and its dimensions."""

    cost: float = 1.0
    """What one point costs."""
    dims: tuple[Dim, ...] = ()
    """The dimensions, outermost first."""

    def __post_init__(self) -> None:
        if not self.dims:
            raise ValueError("a shape needs at least one dimension")


@dataclasses.dataclass(frozen=True)
class NestedOptions:
    """Options of a test pass with structured values."""

    shapes: tuple[Shape, ...] = ()
    """Shapes to try, in order."""
    main: Shape | None = None
    """The preferred shape; null: none."""
    scale: int = 1
    """A plain option beside them."""


@pytest.fixture
def nested_pass(monkeypatch: pytest.MonkeyPatch) -> str:
    info = PassInfo("nested_test", NestedOptions, lambda block, options: block,
                    "nested_test: a pass whose options nest dataclasses.",
                    option_docs(NestedOptions))
    monkeypatch.setitem(REGISTRY, info.name, info)
    return info.name


NESTED = """
target: t
passes:
  - type: nested_test
    options:
      scale: 2
      main: {cost: 1.5, dims: [{name: m, size: 6}, {name: k}]}
      shapes:
        - dims: [{name: m, size: 6, strides: [-1, 0]}, {name: n, size: 16}]
        - cost: 8
          dims:
            - name: k
"""


def test_nested_options_load(tmp_path: Path, nested_pass: str):
    check_option_type(tuple[Shape, ...])
    check_option_type(Shape | None)
    cfg = load_config(write(tmp_path, NESTED))
    assert cfg.passes[0].options == NestedOptions(
        shapes=(Shape(dims=(Dim("m", 6, (-1, 0)), Dim("n", 16))), Shape(8.0, (Dim("k"),))),
        main=Shape(1.5, (Dim("m", 6), Dim("k"))), scale=2)
    # an override replaces a nested value whole, and null clears an optional one
    child = write(tmp_path, f"""
target: child
extends: {tmp_path / "x.yaml"}
passes:
  - {{name: nested_test, options: {{main: null, shapes: [{{dims: [{{name: z}}]}}]}}}}
""", "child.yaml")
    over = load_config(child).passes[0].options
    assert over == NestedOptions(shapes=(Shape(dims=(Dim("z"),)),), scale=2)


@pytest.mark.parametrize("options, line, message, choices", [
    # an unknown key of a nested mapping: its line and the valid keys
    ("main: {dims: [{name: m, sise: 6}]}", 5,
     "unknown key 'sise' in an element of 'dims' of option 'main' of nested_test",
     ("name", "size", "strides")),
    ("shapes:\n        - dims: [{name: m}]\n          costs: 2", 7,
     "unknown key 'costs' in an element of option 'shapes' of nested_test",
     ("cost", "dims")),
    # a value of the wrong type, however deep
    ("shapes:\n        - dims:\n            - {name: m, size: six}", 7,
     "'size' of an element of 'dims' of an element of option 'shapes' of nested_test must "
     "be int, got str 'six'", ()),
    ("main: [1, 2]", 5, "option 'main' of nested_test (Shape) must be a mapping, got a list",
     ()),
    ("shapes: {dims: []}", 5, "option 'shapes' of nested_test (list of Shape) must be a list",
     ()),
    # a field without a default, missing
    ("main: {dims: [{size: 6}]}", 5,
     "an element of 'dims' of option 'main' of nested_test needs the key 'name'", ()),
    # the nested class's own check (__post_init__), at the mapping's line
    ("shapes:\n        - {cost: 2}", 6,
     "an element of option 'shapes' of nested_test: a shape needs at least one dimension",
     ()),
])
def test_nested_option_errors(tmp_path: Path, nested_pass: str, options: str, line: int,
                              message: str, choices: tuple[str, ...]):
    e = error(tmp_path, f"""
target: t
passes:
  - type: nested_test
    options:
      {options}
""")
    assert e.line == line and message in str(e), str(e)
    assert e.choices == choices


def test_option_types_must_be_frozen_dataclasses():
    @dataclasses.dataclass
    class Loose:
        x: int = 0

    with pytest.raises(TypeError, match="frozen"):
        check_option_type(tuple[Loose, ...])
    with pytest.raises(TypeError, match="unsupported"):
        check_option_type(dict[str, int])


def test_stripe_passes_shows_nested_fields(nested_pass: str):
    text = describe_passes()
    block = text[text.index("nested_test:"):]
    assert "    shapes: list of Shape = []" in block
    assert "        Shape:" in block
    assert "            dims: list of Dim = []" in block
    assert "                Dim:" in block
    assert "                    name: str = required" in block
    assert "                        The dimension's name." in block


# the layers: reading the file, then the pipeline builder -------------------------------------


BAD_TYPE = """
target: t
passes:
  - type: cleanup
  - type: autotiel
"""


def test_reading_a_config_needs_no_pass_layer(tmp_path: Path):
    """read_config checks the file but not the pass types; the pipeline builder (resolve)
    does, with the file and line, and load_config, run_pipeline and stripe.compile all
    resolve before any pass runs."""
    path = write(tmp_path, BAD_TYPE)
    raw = read_config(path)
    assert [(p.type, p.line) for p in raw.passes] == [("cleanup", 3), ("autotiel", 4)]
    assert isinstance(raw.passes[0].options, RawOptions)
    for fail in (lambda: resolve(raw), lambda: load_config(path),
                 lambda: run_pipeline(stripe.lower(ADD, ADD_INPUTS), raw),
                 lambda: stripe.compile(ADD, ADD_INPUTS, target=path)):
        with pytest.raises(ConfigError) as err:
            fail()
        assert err.value.line == 4 and err.value.path == str(path)
        assert "unknown pass type 'autotiel'" in str(err.value) and "cleanup" in err.value.choices
    good = read_config(write(tmp_path, "target: t\npasses: [{type: cleanup}]\n", "ok.yaml"))
    resolved = resolve(good)
    assert resolved.passes[0].options == cleanup.Options()
    assert resolve(resolved) is resolved  # nothing left to do


ADD = "function (A[N], B[N]) -> (C) { C = A + B; }"
ADD_INPUTS = {"A": ((4,), "float32"), "B": ((4,), "float32")}


# declared units, memory speeds, host_fallback --------------------------------------------------

UNITS_CONFIG = """
target: t
memories:
  - {name: DRAM, size: 1GiB, bandwidth: 16, latency: 100, main: true}
  - {name: SRAM, size: 256KiB, banks: 4, bandwidth: 64, latency: 2}
compute: {units: 4, host_fallback: false, clock_mhz: 800}
units:
  - {name: PE, count: 4, runs: [contraction, fill], reaches: [SRAM], macs_per_cycle: 64}
  - {name: DMA, kind: transfer, reaches: [DRAM, SRAM], bytes_per_cycle: 32}
"""


def test_units_memory_speeds_and_host_fallback_are_read(tmp_path: Path):
    t = load_config(write(tmp_path, UNITS_CONFIG)).target
    assert t.compute.host_fallback is False and t.compute.clock_mhz == 800
    assert t.main_memory == t.memory("DRAM")
    assert (t.memory("SRAM").bandwidth, t.memory("SRAM").latency) == (64, 2)
    pe, dma = t.unit_decls
    assert (pe.name, pe.kind, pe.count, pe.runs, pe.reaches, pe.macs_per_cycle) == (
        "PE", "compute", 4, ("contraction", "fill"), ("SRAM",), 64)
    assert (dma.kind, dma.reaches, dma.bytes_per_cycle, dma.runs) == (
        "transfer", ("DRAM", "SRAM"), 32, ())
    assert t.unit("DMA") is dma
    assert load_config("cpu_avx2").target.compute.host_fallback is True


def test_units_extend_by_name_key_by_key(tmp_path: Path):
    write(tmp_path, UNITS_CONFIG, "base.yaml")
    t = load_config(write(tmp_path, """
target: t2
extends: base.yaml
units:
  - {name: PE, macs_per_cycle: 256}
  - {name: VPU, runs: [eltwise, reduction], reaches: [SRAM], ops_per_cycle: 16}
""")).target
    assert [u.name for u in t.unit_decls] == ["PE", "DMA", "VPU"]
    assert t.unit("PE").macs_per_cycle == 256 and t.unit("PE").count == 4


@pytest.mark.parametrize("units, message", [
    ("[{name: PE, runs: [contraction], reaches: [L9]}]",
     "unit 'PE' reaches 'L9', which is not a declared memory"),
    ("[{name: PE, runs: [matmul], reaches: [SRAM]}]", "unknown kernel kind 'matmul'"),
    ("[{name: PE, kind: gpu, runs: [eltwise]}]", "unknown kind 'gpu' of unit 'PE'"),
    ("[{name: PE, reaches: [SRAM]}]", "compute unit 'PE' needs the key 'runs'"),
    ("[{name: D, kind: transfer, runs: [copy]}]", "is a transfer unit: it runs no kernels"),
    ("[{name: SRAM, runs: [copy]}]", "has the name of a memory"),
    ("[{name: PE, runs: [copy]}, {name: PE, runs: [copy]}]", "unit 'PE' is listed twice"),
])
def test_unit_errors(tmp_path: Path, units: str, message: str):
    e = error(tmp_path, f"""
target: t
memories:
  - {{name: SRAM, size: 1KiB}}
units: {units}
""")
    assert message in str(e) and e.line is not None


def test_host_fallback_and_main_must_be_booleans(tmp_path: Path):
    e = error(tmp_path, "target: t\ncompute: {host_fallback: 0}\n")
    assert "compute host_fallback must be true or false" in str(e) and e.line == 2
    e = error(tmp_path, "target: t\nmemories:\n  - {name: A, size: 1, main: true}\n"
              "  - {name: B, size: 1, main: true}\n")
    assert "A, B are all marked main" in str(e)


def test_no_host_fallback_needs_a_compute_unit_and_a_main_memory(tmp_path: Path):
    e = error(tmp_path, "target: t\nmemories:\n  - {name: M, size: 1KiB, main: true}\n"
              "compute: {host_fallback: false}\n")
    assert "declares no compute unit" in str(e) and e.line == 4
    e = error(tmp_path, "target: t\nmemories:\n  - {name: M, size: 1KiB}\n"
              "compute: {host_fallback: false}\nunits:\n  - {name: U, runs: [eltwise], "
              "reaches: [M]}\n")
    assert "no memory is marked 'main: true'" in str(e) and list(e.choices) == ["M"]
