"""Bounded compile time: long elementwise chains and many-index contractions compile within
generous bounds (guards against blow-ups, not performance assertions), the searches keep
their budgets and their results, and the pipeline's time budget ends in a clear error.

``benchmarks/compile_time.py`` measures compile time against program size; the bounds here
are far above what it reports, so that a loaded CI machine does not fail them.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import runnable_configs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ops_catalog import OPS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.compile_time import chain, contraction  # noqa: E402
from stripe import interpret, lower  # noqa: E402
from stripe.compiler import compile_program  # noqa: E402
from stripe.config import Config, PassEntry, list_configs, load_config  # noqa: E402
from stripe.errors import LimitError, StripeError  # noqa: E402
from stripe.ir import Block  # noqa: E402
from stripe.passes import autotile, fuse  # noqa: E402
from stripe.passes.manager import (  # noqa: E402
    DEFAULT_COMPILE_SECONDS,
    OutOfTime,
    compile_seconds,
    mismatch,
    random_inputs,
    run_pipeline,
)
from stripe.passes.select import (  # noqa: E402
    Selection,
    check_time,
    domain_of,
    rewrite,
    statement_uses,
    time_budget,
)
from stripe.passes.transforms.stencils import (  # noqa: E402
    Stencil,
    StencilIndex,
    best_match,
    matches,
)
from stripe.passes.transforms.tile import divisors  # noqa: E402
from stripe.target import HOST  # noqa: E402

BOUND = 30.0
"""Seconds a program below may take to compile: generous, a guard against blow-ups."""

MAIN_CONFIGS = [c for c in list_configs() if not c.startswith("examples")]


def _pipeline_seconds(source: str, inputs: dict, config_name: str) -> float:
    """Seconds the config's pipeline (verifier on) takes on the program."""
    program = lower(source, inputs)
    start = time.monotonic()
    run_pipeline(program, load_config(config_name), verify=True, seconds=4 * BOUND)
    return time.monotonic() - start


def _compile_and_compare(source: str, inputs: dict, config_name: str) -> float:
    """Run the config's pipeline (verifier on), build and run the C, compare with the
    interpreter on the lowered program; the seconds the pipeline took."""
    program = lower(source, inputs)
    config = load_config(config_name)
    start = time.monotonic()
    final, trace = run_pipeline(program, config, verify=True, seconds=4 * BOUND)
    took = time.monotonic() - start
    rng = np.random.default_rng(3)  # values in [-0.5, 0.5): long chains stay bounded
    arrays = {n: (rng.random(a.shape) - 0.5).astype(a.dtype)
              for n, a in random_inputs(program).items()}
    want = interpret(program, arrays)
    got = compile_program(final, trace, target=config.target, decided=True)(**arrays)
    for name, value in want.items():
        assert mismatch(got[name], value) is None, (config_name, name)
    return took


# long chains and many indexes ----------------------------------------------------------------


@pytest.mark.parametrize("config_name", list_configs())
def test_long_elementwise_chain_passes_in_bounded_time(config_name: str) -> None:
    # a shape of its own per config: no pass meets a program equal to one it saw before
    side = 8 + list_configs().index(config_name)
    assert _pipeline_seconds(*chain(200, side=side), config_name) < BOUND


@pytest.mark.parametrize("config_name", runnable_configs())
def test_chain_results_equal_the_interpreter(config_name: str) -> None:
    assert _compile_and_compare(*chain(60, side=8), config_name) < BOUND


@pytest.mark.parametrize("config_name", runnable_configs())
def test_twelve_index_contraction_compiles_in_bounded_time(config_name: str) -> None:
    source, inputs = contraction(12, size=2)
    assert _compile_and_compare(source, inputs, config_name) < BOUND


def test_twelve_plus_twelve_indexes_stencil_search_is_bounded() -> None:
    """24 indexes against five-slot micro-kernels: the slot-by-slot search prunes at once."""
    assert _pipeline_seconds(*contraction(24, size=2), "cpu_avx2") < BOUND


def test_fuse_on_a_long_chain_grows_linearly() -> None:
    """Four times the chain costs about four times the time (16x would be quadratic);
    measured on the fuse pass alone, best of two runs each."""
    options = fuse.Options(fused_set=("fused",))

    def best(n: int) -> float:
        program = lower(*chain(n, side=4))
        times = []
        for _ in range(2):
            start = time.perf_counter()
            fuse.run(program, options, HOST)
            times.append(time.perf_counter() - start)
        return min(times)

    small, large = best(60), best(240)
    assert large < 10 * small + 0.5, (small, large)


def test_second_compile_of_an_equal_program_costs_the_same() -> None:
    """Memo tables compare their keys by value: the searches hand ``poly`` their ancestors'
    domains only, so a program equal to one compiled before (a new object) is not compared
    whole on every lookup."""
    source, inputs = chain(150, side=4)
    options = fuse.Options(fused_set=("fused",))
    times = []
    for _ in range(2):
        program = lower(source, inputs)
        start = time.perf_counter()
        fuse.run(program, options, HOST)
        times.append(time.perf_counter() - start)
    assert times[1] < 3 * times[0] + 0.5, times


def test_chain_fuses_in_pieces_of_max_views() -> None:
    program = lower(*chain(40, side=4))
    pieces = _main(fuse.run(program, fuse.Options(max_views=8), HOST)).stmts
    assert 4 < len(pieces) < 40
    assert all(len(statement_uses(s)) <= 8 for s in pieces)
    whole = _main(fuse.run(program, fuse.Options(max_views=0), HOST)).stmts
    assert len(whole) == 1
    arrays = random_inputs(program)
    want = interpret(program, arrays)["O"]
    for options in (fuse.Options(max_views=8), fuse.Options(max_views=0)):
        got = interpret(fuse.run(program, options, HOST), arrays)["O"]
        assert mismatch(got, want) is None


def _main(program: Block) -> Block:
    [main] = program.sub_blocks
    return main


# the fuse search against the plain one ---------------------------------------------------------


def _plain_search(parent: Block, domains: tuple[Block, ...],
                  options: fuse.Options) -> tuple:
    """The search as its definition states it: after every fusion, from the first
    statement again, every producer and consumer rescanned."""
    stmts = parent.stmts
    failed: set = set()
    while True:
        uses = [statement_uses(s) for s in stmts]
        fused = None
        for i, a in enumerate(stmts):
            if fused is not None:
                break
            if not (isinstance(a, Block) and fuse._matches(a, options.a_reqs, options)):
                continue
            found = {}
            for t, (_, writes) in uses[i].items():
                if not writes or not parent.has_ref(t):
                    continue
                for j in range(i + 1, len(stmts)):
                    if t in uses[j]:
                        if uses[j][t][0]:
                            found[t] = j
                        break
            for j, t in sorted(((j, t) for t, j in found.items()), key=lambda p: p[0]):
                b = stmts[j]
                if not (isinstance(b, Block) and fuse._matches(b, options.b_reqs, options)):
                    continue
                users = [k for k in range(j) if t in uses[k]]
                members = users + [j]
                if users[-1] != i or not all(isinstance(stmts[k], Block) for k in members):
                    continue
                key = (t, stmts[members[0]:j + 1])
                if key in failed:
                    continue
                block = fuse._try_group(stmts[members[0]:j + 1],
                                        [k - members[0] for k in members], t, parent,
                                        domains, options)
                if block is None:
                    failed.add(key)
                    continue
                gone = set(members[:-1])
                fused = tuple(block if k == j else s for k, s in enumerate(stmts)
                              if k not in gone)
                break
        if fused is None:
            return stmts
        stmts = fused


def _plain_fuse(program: Block, options: fuse.Options) -> Block:
    options = dataclasses.replace(options, cache_width=HOST.cache_line)
    return rewrite(program, Selection(options.parent_reqs),
                   lambda b, site: b.replace(stmts=_plain_search(
                       b, site.domains + (domain_of(b),), options)),
                   order="pre")


@st.composite
def _dags(draw: st.DrawFn) -> str:
    """An elementwise program over 4x6 tensors with row sums broadcast back, each statement
    using two earlier tensors (so intermediates feed several consumers)."""
    full = ["A", "B"]
    rows: list[str] = []
    lines = []
    for k in range(draw(st.integers(3, 14))):
        name = f"T{k}"
        kind = draw(st.integers(0, 5))
        if kind == 0:
            src = draw(st.sampled_from(full))
            lines.append(f"R{k}[n : N] = +({src}[n, m]);")
            rows.append(f"R{k}")
            continue
        x = draw(st.sampled_from(full))
        if kind == 1 and rows:
            r = draw(st.sampled_from(rows))
            lines.append(f"{name}[n, m : N, M] = =({x}[n, m] * {r}[n]);")
        else:
            y = draw(st.sampled_from(full))
            lines.append(f"{name} = {x} {draw(st.sampled_from(['+', '*', '-']))} {y};")
        full.append(name)
    last = full[-1] if len(full) > 2 else "A"
    lines.append(f"O = {last} + B;")
    return "function (A[N, M], B[N, M]) -> (O) {\n    " + "\n    ".join(lines) + "\n}"


FUSE_OPTIONS = [
    fuse.Options(),
    fuse.Options(max_views=3),
    fuse.Options(fused_set=("fused",), max_point_bytes=256, max_shared_bytes=256),
    fuse.Options(perfect=True),
]


LONG = settings._current_profile == "long"  # type: ignore[attr-defined]


@settings(max_examples=500 if LONG else 25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(source=_dags(), k=st.integers(0, len(FUSE_OPTIONS) - 1))
def test_fuse_search_matches_the_plain_search(source: str, k: int) -> None:
    """The indexed search, which resumes after a fusion where the fusion can matter, fuses
    exactly what the plain search (from the first statement every time) fuses."""
    shape = ((4, 6), "float32")
    program = lower(source, {"A": shape, "B": shape})
    options = FUSE_OPTIONS[k]
    assert fuse.run(program, options, HOST) == _plain_fuse(program, options)


@pytest.mark.parametrize("op", [op for op in OPS if op.source.count(";") > 1],
                         ids=lambda op: op.name)
def test_fuse_search_matches_the_plain_search_on_the_catalogue(op: object) -> None:
    program = lower(op.source, op.input_specs())  # type: ignore[attr-defined]
    for options in FUSE_OPTIONS[:3]:
        assert fuse.run(program, options, HOST) == _plain_fuse(program, options)


# autotile: divisors, candidate sizes, the tile budget -------------------------------------------


def test_divisors_from_factors() -> None:
    for n in list(range(1, 400)) + [720720, 2**20 * 3**5, 999_983 * 1_000_003]:
        plain = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
        want = sorted(set(plain) | {n // d for d in plain})
        assert list(divisors(n)) == want, n
    start = time.monotonic()
    assert len(divisors(10**18)) == 19 * 19
    assert len(divisors(2**63 - 1)) == 96  # 7^2 * 73 * 127 * 337 * 92737 * 649657
    assert divisors(2**61 - 1) == (1, 2**61 - 1)  # a Mersenne prime
    assert divisors(18446744073709551557) == (1, 18446744073709551557)  # prime below 2^64
    p, q = 4294967291, 4294967279  # two primes near 2^32: Pollard's rho, not trial division
    assert divisors(p * q) == (1, q, p, p * q)
    assert time.monotonic() - start < 5
    with pytest.raises(ValueError, match="n must be >= 1"):
        divisors(0)


def test_huge_range_candidate_sizes_are_capped() -> None:
    options = autotile.Options()
    sizes = autotile._candidate_sizes(10**18, options)
    assert len(sizes) > 64  # 361 divisors and 60 powers of two
    thinned = autotile._thin(sizes, options.max_sizes)
    assert len(thinned) == 64 and thinned[0] == 1 and thinned[-1] == 10**18
    assert list(thinned) == sorted(set(thinned))
    assert autotile._thin(sizes[:10], 64) == sizes[:10]


def _contraction_kernel(n: int, size: int) -> tuple[Block, tuple[Block, ...]]:
    program = lower(*contraction(n, size))
    main = _main(program)
    kernel = next(b for b in main.sub_blocks if "contraction" in b.tags)
    return kernel, (program, main)


def test_autotile_budget_keeps_the_best_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel, ancestors = _contraction_kernel(12, 4)
    costed = []
    real = autotile.tile_cost
    monkeypatch.setattr(autotile, "tile_cost",
                        lambda *a, **k: costed.append(1) or real(*a, **k))
    options = autotile.Options(only_po2=True, max_total_size=65536, max_tiles=300)
    best = autotile.choose_tile(kernel, options, ancestors=ancestors)
    assert best is not None and best.cost is not None
    assert len(costed) == 300  # 3^12 tiles within the caps: the budget stops the search
    assert autotile.choose_tile(kernel, options, ancestors=ancestors) == best  # deterministic
    # the best of more tiles is at least as cheap
    more = autotile.choose_tile(kernel, dataclasses.replace(options, max_tiles=3000),
                                ancestors=ancestors)
    assert more is not None and more.key() <= best.key()


def test_autotile_under_budget_is_unchanged() -> None:
    kernel, ancestors = _contraction_kernel(6, 4)
    options = autotile.Options(only_po2=True, max_total_size=4096)
    limited = autotile.choose_tile(kernel, options, ancestors=ancestors)
    unlimited = autotile.choose_tile(kernel, dataclasses.replace(options, max_tiles=0,
                                                                 max_sizes=0),
                                     ancestors=ancestors)
    assert limited == unlimited


@pytest.mark.parametrize("name", ["max_tiles", "max_sizes"])
def test_autotile_budget_options_are_checked(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        autotile.Options(**{name: -1})


@pytest.mark.parametrize("name", ["units", "units_parts"])
def test_autotile_units_are_capped(name: str) -> None:
    """The balance term plans every share: a huge count is refused up front, not a
    MemoryError inside the pass."""
    assert getattr(autotile.Options(**{name: autotile.MAX_UNITS}), name) == autotile.MAX_UNITS
    with pytest.raises(ValueError, match=f"{name} must be at most 1024"):
        autotile.Options(**{name: 2**63 - 1})


# stencil: the slot-by-slot search against every permutation -------------------------------------


def _all_permutations(block: Block, stencil: Stencil, allow_pad: bool) -> list:
    """The matches by trying every permutation of the indexes and of the views."""
    from stripe.passes.transforms import stencils as S

    outs, ins = S._views(block)
    if len(outs) != stencil.n_outs or len(ins) != stencil.n_ins:
        return []
    free = [i for i in block.idxs if not i.is_passed_in]
    reductions = ({i.name for i in free if i.range > 1
                   and all(S.ref_stride(r, i.name) == 0 for r in outs)}
                  if stencil.whole_reduction else set())
    found = []
    for chosen in itertools.permutations(free, len(stencil.idxs)):
        if not all(S._size_ok(s.size, i.range, allow_pad) for s, i in zip(stencil.idxs, chosen)):
            continue
        if not reductions <= {i.name for i in chosen}:
            continue
        for o_perm in itertools.permutations(outs):
            for i_perm in itertools.permutations(ins):
                if all(S._code_ok(c, S.ref_stride(r, i.name))
                       for s, i in zip(stencil.idxs, chosen)
                       for which, perm in (("outs", o_perm), ("ins", i_perm))
                       for c, r in zip(getattr(s, which), perm)):
                    found.append(S._make_match(block, stencil, 0, chosen, o_perm, i_perm))
    return found


def _config_stencils() -> list[Stencil]:
    out: list[Stencil] = []
    for name in MAIN_CONFIGS:
        for entry in load_config(name).passes:
            for s in getattr(entry.options, "stencils", ()):
                if s not in out:
                    out.append(s)
    return out


def _leaf_kernels() -> list[Block]:
    out = []
    for op in OPS:
        program = lower(op.source, op.input_specs())
        out += [b for _, b in program.walk() if not b.sub_blocks and b.idxs]
    return out


def test_stencil_search_matches_every_permutation() -> None:
    """Same matches, in the same order, as trying every permutation: on every leaf kernel
    of the catalogue against every stencil of the shipped configs, with and without
    padding."""
    stencils = _config_stencils()
    kernels = _leaf_kernels()
    assert stencils and kernels
    hits = 0
    for kernel in kernels:
        for stencil in stencils:
            for pad in (False, True):
                want = _all_permutations(kernel, stencil, pad)
                assert list(matches(kernel, stencil, allow_pad=pad)) == want
                hits += bool(want)
    assert hits > 10


def test_stencil_budget_keeps_the_best_so_far() -> None:
    kernel, _ = _contraction_kernel(8, 4)
    # slots that many indexes fit alike: the search multiplies
    loose = Stencil((StencilIndex("a", -1, (-1,), (-1, -1)),
                     StencilIndex("b", -1, (-1,), (-1, -1)),
                     StencilIndex("c", -1, (0,), (-1, -1)),
                     StencilIndex("d", -1, (0,), (-1, -1))))
    everything = list(matches(kernel, loose, max_steps=0))
    assert everything == _all_permutations(kernel, loose, False)
    assert len(everything) == (4 * 3) * (4 * 3) * 2  # outputs, reductions, input orders
    few = list(matches(kernel, loose, max_steps=20))
    assert 0 < len(few) < len(everything) and few == everything[:len(few)]
    assert best_match(kernel, [loose], max_steps=20) is not None


# the pipeline's time budget ------------------------------------------------------------------


def _fuse_config() -> Config:
    entry = PassEntry("fuse_rows", "fuse", fuse.Options(fused_set=("fused",)))
    return Config("fuse_only", HOST, passes=(entry,))


def test_budget_error_names_the_pass_and_the_block() -> None:
    program = lower(*chain(50, side=4))
    with pytest.raises(OutOfTime) as info:
        run_pipeline(program, _fuse_config(), seconds=1e-9)
    e = info.value
    assert isinstance(e, LimitError) and isinstance(e, StripeError)
    assert (e.pass_name, e.index, e.pass_type) == ("fuse_rows", 0, "fuse")
    assert e.path == "program"
    assert "pass 'fuse_rows' (passes[0], type fuse)" in str(e)
    assert "at block program" in str(e) and "STRIPE_COMPILE_SECONDS" in str(e)


def test_budget_error_from_a_shipped_config() -> None:
    program = lower(*chain(50, side=4))
    with pytest.raises(OutOfTime, match=r"pass 'cleanup_early' \(passes\[0\], type cleanup\) "
                                        r"\(.*cpu_generic\.yaml line \d+\) at block program"):
        run_pipeline(program, load_config("cpu_avx2"), seconds=1e-9)


def test_budget_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STRIPE_COMPILE_SECONDS", raising=False)
    assert compile_seconds() == DEFAULT_COMPILE_SECONDS
    monkeypatch.setenv("STRIPE_COMPILE_SECONDS", "12.5")
    assert compile_seconds() == 12.5 and compile_seconds(3) == 3.0
    monkeypatch.setenv("STRIPE_COMPILE_SECONDS", "inf")
    assert compile_seconds() == math.inf
    monkeypatch.setenv("STRIPE_COMPILE_SECONDS", "1e-9")
    with pytest.raises(OutOfTime, match="fuse_rows"):
        run_pipeline(lower(*chain(5, side=4)), _fuse_config())
    for bad in ("0", "-3", "soon", "nan"):
        monkeypatch.setenv("STRIPE_COMPILE_SECONDS", bad)
        with pytest.raises(StripeError, match="STRIPE_COMPILE_SECONDS"):
            compile_seconds()
    for bad_arg in (0, -1.0, math.nan, "10", True):
        with pytest.raises(ValueError, match="seconds"):
            compile_seconds(bad_arg)  # type: ignore[arg-type]


def test_searches_consult_the_clock() -> None:
    kernel, ancestors = _contraction_kernel(4, 4)
    with time_budget(1e-9):
        time.sleep(0.001)
        with pytest.raises(OutOfTime) as info:
            autotile.choose_tile(kernel, autotile.Options(), ancestors=ancestors,
                                 path="program/main/kernel_1")
        assert info.value.path == "program/main/kernel_1"
    check_time("anywhere")  # no budget: never raises
    with pytest.raises(ValueError, match="seconds"):
        with time_budget(0):
            pass


def test_generous_budget_changes_nothing() -> None:
    program = lower(*chain(12, side=4))
    config = load_config("cpu_avx2")
    a, _ = run_pipeline(program, config, seconds=math.inf)
    timings: list[tuple[str, float, float]] = []
    b, trace = run_pipeline(program, config, verify=True, timings=timings)
    assert a == b
    assert [name for name, _, _ in timings] == [name for name, _ in trace[1:]]
    assert all(p >= 0 and v >= 0 for _, p, v in timings)


def test_interpreter_agrees_on_a_chain_with_reductions() -> None:
    """A chain that mixes row reductions in, through the CPU pipeline, equals the
    interpreter (the fused pieces and their materialised ends are right)."""
    lines = ["T0 = A + B;"]
    for k in range(1, 80):
        if k % 10 == 0:
            lines.append(f"R{k}[n : N] = +(T{k - 1}[n, m]);")
            lines.append(f"T{k}[n, m : N, M] = =(T{k - 1}[n, m] * R{k}[n]);")
        else:
            lines.append(f"T{k} = T{k - 1} {'*' if k % 2 else '+'} A;")
    lines.append("O = T79 + B;")
    source = "function (A[N, M], B[N, M]) -> (O) {\n    " + "\n    ".join(lines) + "\n}"
    shape = ((5, 7), "float32")
    took = _compile_and_compare(source, {"A": shape, "B": shape}, "cpu_avx2")
    assert took < BOUND
    assert np.isfinite(took)


def test_search_budget_options_are_checked() -> None:
    from stripe.passes import stencil

    with pytest.raises(ValueError, match="max_views"):
        fuse.Options(max_views=-1)
    with pytest.raises(ValueError, match="max_steps"):
        stencil.Options(max_steps=-1)


def test_cleanup_and_localize_grow_linearly() -> None:
    """Each pass alone on a chain of n and of 4n statements (the lowered chain: one kernel
    per statement in ``main``): four times the chain costs about four times the process CPU
    time (16x would be quadratic). One run each, cleanup first: its memo tables have not
    seen the programs, and localize keeps none."""
    from stripe.passes import cleanup, localize

    programs = [lower(*chain(n, side=4)) for n in (1000, 4000)]
    for name, run, options in (("cleanup", cleanup.run, cleanup.Options()),
                               ("localize", localize.run, localize.Options())):
        times = []
        for program in programs:
            start = time.process_time()
            run(program, options, HOST)  # type: ignore[operator]
            times.append(time.process_time() - start)
        small, large = times
        assert large < 8 * small + 0.5, (name, small, large)


def test_emitting_c_grows_linearly() -> None:
    """The C back end on a chain of n and of 4n unfused kernels (``main`` allocates one
    buffer per statement, and deciding whether each must be zeroed looks at the kernel
    that first touches it): four times the chain costs about four times the CPU time."""
    from stripe.codegen.c_emitter import emit_c
    from stripe.passes.manager import decide

    programs = [decide(lower(*chain(n, side=4)), HOST) for n in (500, 2000)]
    times = []
    for program in programs:
        start = time.process_time()
        emit_c(program, HOST.compute)
        times.append(time.process_time() - start)
    small, large = times
    assert large < 8 * small + 0.5, (small, large)
