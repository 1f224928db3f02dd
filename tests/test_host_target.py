"""The ``host`` target: the shipped CPU config that fits the machine, sized to its cores,
and the default of ``stripe.compile`` and ``stripe run``; ``none`` runs no config."""

from __future__ import annotations

import os

import numpy as np
import pytest

import stripe
from stripe import host, pipeline_cache
from stripe.cli import main
from stripe.config import describe_configs, load_config

SOURCE = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
SHAPES = {"A": ((37, 23), "float32"), "B": ((23, 41), "float32")}
AVX2 = frozenset({"sse2", "avx", "avx2", "fma", "f16c"})
AVX512 = AVX2 | {"avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512cd"}


@pytest.mark.parametrize("flags, want", [
    (AVX512, "cpu_avx512"), (AVX2, "cpu_avx2"), (AVX2 - {"fma"}, "cpu_generic"),
    (frozenset({"sse2"}), "cpu_generic"), (frozenset(), "cpu_generic"), (None, "cpu_generic"),
])
def test_the_best_config_the_cpu_can_run(flags, want):
    assert host.choose_config(flags) == want


def test_units_come_from_the_affinity_mask_then_omp_num_threads():
    cores = len(os.sched_getaffinity(0))
    assert host.available_units({}) == cores
    assert host.available_units({"OMP_NUM_THREADS": "1"}) == 1
    assert host.available_units({"OMP_NUM_THREADS": "1000"}) == cores  # never above the mask
    assert host.available_units({"OMP_NUM_THREADS": "1,2"}) == 1      # nested: the outer level
    for ignored in ("0", "-3", "two", "", " "):
        assert host.available_units({"OMP_NUM_THREADS": ignored}) == cores


def test_the_host_config_is_the_fitting_one_with_the_process_cores(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    config = load_config("host")
    base = load_config(host.choose_config(host._cflags.cpu_flags(), this_cpu=True))
    assert config.name == "host" and config.target.name == "host"
    assert config.extends[0] == base.path
    assert config.passes == base.passes and config.cflags == base.cflags
    assert config.compute.units == host.available_units()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    one = load_config("host")
    assert one.compute.units == 1
    # what was detected is part of the pipeline cache's key
    program = stripe.lower(SOURCE, SHAPES)
    if config.compute.units != 1:
        assert pipeline_cache.key(program, one, True) != pipeline_cache.key(program, config, True)
    assert "host: " in describe_configs()


def test_compile_defaults_to_the_host_and_none_runs_no_config(monkeypatch):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((37, 23), np.float32), rng.standard_normal((23, 41), np.float32)
    default = stripe.compile(SOURCE, SHAPES)
    named = stripe.compile(SOURCE, SHAPES, target="host")
    none = stripe.compile(SOURCE, SHAPES, target="none")
    base = host.choose_config(host._cflags.cpu_flags(), this_cpu=True)
    config_passes = [p.name for p in load_config(base).passes]
    assert set(config_passes) <= {name for name, _ in default.trace}
    assert default.c_source == named.c_source
    decisions = {"start_fresh", "order_loops", "vectorize", "collapse_threads"}
    assert {name for name, _ in none.trace} <= {"lower"} | decisions  # the back end's own
    for prog in (default, named, none):
        np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-4, atol=1e-4)


def test_the_command_line_runs_on_the_host_by_default(tmp_path, capsys):
    path = tmp_path / "mm.tile"
    path.write_text(SOURCE)
    args = ["run", str(path), "-i", "A=37x23:float32", "-i", "B=23x41:float32", "--check"]
    assert main(args) == 0
    assert main(args + ["--target", "none"]) == 0
    assert "(ok)" in capsys.readouterr().out
