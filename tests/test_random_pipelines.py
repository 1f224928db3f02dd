"""Random pass pipelines on random programs: every pass keeps the meaning in any order.

A user config may run the pool's passes in any order with any options. This draws a program
(the random contractions of ``test_random_programs`` and its programs of PlaidML's constructs
over every dtype, a matmul, convolution, depthwise convolution or pooling at odd sizes in
float32, float64 or int32, or any op of the shared catalogue) and a pipeline drawn from every
pass in the pool (some of the passes in a config's usual order, neighbours swapped, others
inserted anywhere) with
drawn options, then runs it through the pass manager with the verifier and
the reference interpreter after every pass (``check=True``: the same outputs as before the
pass). The interpreter starts new memory at NaN, so a pass that drops or misplaces an
initialisation is caught. Some examples are also compiled to C and compared, threaded
ones over several calls.

``test_hoist_on_random_packed_tiles`` draws larger matmuls and convolutions, tiled and
packed, for ``hoist``, which the first test's small programs rarely give work to.

The default example count is small for CI; ``pytest --hypothesis-profile=long`` draws many
more.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from ops_catalog import OPS, random_array
from stencil_text import stencil_from
from test_random_programs import Program, parity_array, parity_programs, programs

import stripe
from stripe.compiler import compile_program
from stripe.config import Config, PassEntry, Target
from stripe.passes import REGISTRY
from stripe.passes.manager import pipeline, run_pipeline
from stripe.target import Compute

_EXAMPLES = 150 if settings.default.max_examples < 1000 else settings.default.max_examples
_THREADED_CALLS = 50

MATMUL_KERNEL = ("{startup_cost: 8, idxs: [{name: m, size: 3, outs: [-1], ins: [-1, 0]},"
                 " {name: n, size: 4, outs: [1], ins: [0, 1]},"
                 " {name: k, size: -1, outs: [0], ins: [-1, -1]}]}")
CONV_KERNEL = ("{startup_cost: 8, idxs: [{name: m, size: 2, outs: [-1], ins: [-1, 0]},"
               " {name: n, size: 4, outs: [1], ins: [0, 1]},"
               " {name: k, size: -1, outs: [0], ins: [-1, -1]},"
               " {name: k2, size: -1, outs: [0], ins: [-1, -1]},"
               " {name: k3, size: -1, outs: [0], ins: [-1, -1]}]}")
VECTOR_KERNEL = ("{startup_cost: 8, idxs: [{name: n, size: 4, outs: [1], ins: [0, 1]},"
                 " {name: k, size: -1, outs: [0], ins: [-1, -1]}]}")
DOT_KERNEL = ("{startup_cost: 8, whole_reduction: true,"
              " idxs: [{name: m, size: 3, outs: [-1], ins: [-1, 0]},"
              " {name: k, size: -1, outs: [0], ins: [1, 1]}]}")
STENCILS = tuple(stencil_from(t) for t in (MATMUL_KERNEL, CONV_KERNEL, VECTOR_KERNEL,
                                             DOT_KERNEL))

TEMPLATES = {
    "matmul": ("function (A[M, K], B[K, N]) -> (O) { O[m, n : M, N] = +(A[m, k] * B[k, n]); }",
               lambda m, k, n: {"A": (m, k), "B": (k, n)}),
    "matmul_relu": ("function (A[M, K], B[K, N], C[N]) -> (O) {\n"
                    "    T[m, n : M, N] = +(A[m, k] * B[k, n]);\n    O = max(T + C, 0.0);\n}",
                    lambda m, k, n: {"A": (m, k), "B": (k, n), "C": (n,)}),
    "conv": ("function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (O) {\n"
             "    O[n, x, y, co : N, X, Y, CO] ="
             " +(I[n, x + i - 1, y + j - 1, ci] * F[i, j, ci, co]);\n}",
             lambda m, k, n: {"I": (1, m, k, 3), "F": (3, 3, 3, n)}),
    "depthwise": ("function (I[N, X, Y, C], F[KX, KY, C]) -> (O) {\n"
                  "    O[n, x, y, c : N, X, Y, C] ="
                  " +(I[n, x + i - 1, y + j - 1, c] * F[i, j, c]);\n}",
                  lambda m, k, n: {"I": (1, m, k, n), "F": (3, 3, n)}),
    "gemv": ("function (A[M, K], X[K]) -> (O) { O[m : M] = +(A[m, k] * X[k]); }",
             lambda m, k, n: {"A": (m + n, 5 * k), "X": (5 * k,)}),
    "maxpool": ("function (I[X, Y]) -> (O) {\n"
                "    O[x, y : (X + 1) / 2, (Y + 1) / 2] = >(I[2 * x + i, 2 * y + j]), "
                "i < 2, j < 2;\n}",
                lambda m, k, n: {"I": (m, k + n)}),
}


_RANGES = {op.source: op.ranges for op in OPS}
_TOLERANCE = {op.source: max(op.rtol, op.atol, 1e-4) for op in OPS}


@st.composite
def workloads(draw) -> Program:  # type: ignore[no-untyped-def]
    kind = draw(st.sampled_from(["random", "template", "catalogue", "parity"]))
    if kind == "random":
        return draw(programs())
    if kind == "parity":  # PlaidML's constructs and every dtype
        return draw(parity_programs())
    if kind == "catalogue":  # every op of the shared catalogue: softmax, pooling, gathers...
        op = draw(st.sampled_from(OPS))
        return Program(op.source, dict(op.inputs))
    source, shapes = TEMPLATES[draw(st.sampled_from(sorted(TEMPLATES)))]
    sizes = [draw(st.integers(1, 13)) for _ in range(3)]
    dtype = draw(st.sampled_from(["float32", "float32", "float64", "int32"]))
    return Program(source, {k: (s, dtype) for k, s in shapes(*sizes).items()})


def _options(draw, kind: str) -> dict[str, object]:  # type: ignore[no-untyped-def]
    pick = lambda *xs: draw(st.sampled_from(xs))  # noqa: E731
    flag = lambda: draw(st.booleans())  # noqa: E731
    if kind in ("start_fresh", "order_loops", "collapse_threads"):
        return {}
    if kind == "vectorize":
        return {"lanes": flag(), "row_accumulators": flag(), "peel": flag()}
    if kind in ("localize", "scalarize", "place", "cleanup"):
        return {"place": {"locs": ("L2",), "mem_KiB": 64}}.get(kind, {})
    if kind == "fuse":
        return {"fused_set": ("fused",), "perfect": flag()}
    if kind == "pad":
        return {"reqs": ("contraction",), "max_overhead": 1.0}
    if kind == "boundary":
        return {"reqs": (pick("contraction", "all", "tile"),), "rebase": flag()}
    if kind == "autotile":
        return {"reqs": (pick("contraction", "tile"),), "outer_set": ("tiles",),
                "inner_set": ("tile", "contraction"), "max_total_size": pick(64, 256, 1024),
                "only_po2": flag(), "acc_idxs": flag(), "max_streams": pick(0, 0, 4, 16),
                "stream_start": pick(0, 0, 256),
                "stencils": STENCILS if flag() else ()}
    if kind == "stencil":
        return {"reqs": (pick("contraction", "tile"),), "allow_pad": flag(),
                "inner_set": ("microkernel",), "split_tails": pick((), ("m",)),
                "stencils": STENCILS}
    if kind == "cache":
        dirs = draw(st.lists(st.sampled_from(["in", "out", "inout"]), min_size=1,
                             max_size=3, unique=True))
        return {"reqs": (pick("tile", "tile", "tile", "contraction", "microkernel"),),
                "dirs": tuple(dirs),
                "mem_loc": "L2", "xfer_loc": "CPU", "row_pad": pick(0, 4),
                "acc_dtype": pick("", "int32"), "init_loc": pick("", "PE")}
    if kind == "hoist":
        return {"reqs": (pick("tiles", "tiles", "all"),), "reorder": flag(),
                "shared_outer": flag(), "output_cost": pick(0.0, 0.5, 1.0),
                "units": pick(1, 2), "in_place": pick(0, 0, 64)}
    if kind == "fold_init":
        return {"reqs": (pick("contraction", "all"),)}
    if kind == "threads":
        return {"reqs": (pick("kernel", "tile", "microkernel"),), "num_threads": 2,
                "min_work": 1, "split_reductions": flag(), "split_min_points": pick(1, 64)}
    if kind == "partition_compute":
        return {"reqs": (pick("contraction", "tile"),), "num_parts": 2}
    if kind == "map_threads":
        threads = pick(1, 4, 8)
        return {"reqs": (pick("contraction", "tile", "kernel"),), "threads": threads,
                "subgroup": pick(1, 2, 4) if threads >= 4 else 1, "inner_set": ("tile",)}
    if kind == "assign_unit":
        return {"reqs": (pick("tile", "contraction", "kernel"),), "unit": pick("", "PE")}
    if kind == "partition_memory":
        return {"reqs": (pick("tile", "contraction"),), "num_parts": 2, "mem_name": "L2"}
    if kind == "transpose":
        return {"only_tmp": flag()}
    if kind == "schedule":
        return {"reqs": (pick("tiles", "all"),), "mem_loc": "L2", "mem_KiB": 64,
                "xfer_loc": "CPU", "double_buffer": flag()}
    raise AssertionError(f"no options drawn for pass type {kind}")


# The order a config would run them in; a drawn pipeline keeps some of them, swaps some
# neighbours and inserts others anywhere, so that both plausible and odd orders appear (a
# uniformly random order rarely meets what a pass looks for: hoist wants packed tiles).
ORDER = ("fuse", "localize", "scalarize", "pad", "boundary", "autotile", "cache", "hoist",
         "autotile", "stencil", "fold_init", "threads", "map_threads", "partition_compute",
         "partition_memory", "transpose", "schedule", "place", "cleanup")


@st.composite
def pipelines(draw) -> tuple[PassEntry, ...]:  # type: ignore[no-untyped-def]
    kinds = [k for k in ORDER if draw(st.integers(0, 2))]
    for _ in range(draw(st.integers(0, 3))):
        if len(kinds) > 1:
            i = draw(st.integers(0, len(kinds) - 2))
            kinds[i], kinds[i + 1] = kinds[i + 1], kinds[i]
    for _ in range(draw(st.integers(0, 2))):
        kinds.insert(draw(st.integers(0, len(kinds))), draw(st.sampled_from(sorted(REGISTRY))))
    return tuple(PassEntry(f"{kind}_{k}", kind, REGISTRY[kind].options(**_options(draw, kind)))
                 for k, kind in enumerate(kinds))


@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_every_pass_type_gets_options(data: st.DataObject) -> None:
    for kind in REGISTRY:  # a new pass must get its options drawn above, or this fails
        REGISTRY[kind].options(**_options(data.draw, kind))


@settings(max_examples=_EXAMPLES, deadline=None, derandomize=_EXAMPLES == 150,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(prog=workloads(), passes=pipelines(), seed=st.integers(0, 2**16),
       in_c=st.integers(0, 3), chains=st.sampled_from([(1, 1), (4, 8), (2, 3)]))
def test_random_pipeline_keeps_the_meaning(prog: Program, passes: tuple[PassEntry, ...],
                                           seed: int, in_c: int,
                                           chains: tuple[int, int]) -> None:
    rng = np.random.default_rng(seed)
    ranges = _RANGES.get(prog.source, {})
    arrays = {n: parity_array(rng, s, t) if prog.parity
              else random_array(rng, s, t, *ranges.get(n, (None, None)))
              for n, (s, t) in prog.inputs.items()}
    program = stripe.lower(prog.source, arrays)
    config = Config("random", Target("random"), passes=passes)
    final, trace = run_pipeline(program, config, verify=True, check=True, inputs=arrays)
    if in_c == 0:  # one example in four also in C, over outputs filled with 0xFF bytes
        want = stripe.interpret(program, arrays)
        # lane sets and kernel accumulator sets (compute.lane_chains, kernel_chains)
        vector = Compute(vector_width=32, vector_registers=16, kernel_unroll=2,
                         kernel_chains=chains[1], lane_chains=chains[0])
        compiled = compile_program(final, trace, vector=vector)
        compiled.fill_byte = 0xFF
        tol = _TOLERANCE.get(prog.source, prog.tol)
        # a race shows only in some calls (gcc once invented stores in a threaded loop:
        # docs/codegen.md#flags), so threaded programs run several times
        for _ in range(_THREADED_CALLS if "#pragma omp" in compiled.c_source else 1):
            got = compiled(**arrays)
            for name in want:
                np.testing.assert_allclose(got[name], want[name], rtol=tol, atol=tol,
                                           err_msg=f"{name} of {prog.source}")


@st.composite
def hoist_pipelines(draw) -> tuple[PassEntry, ...]:  # type: ignore[no-untyped-def]
    """Tiles with packed inputs, which is what ``hoist`` works on, then ``hoist`` with drawn
    options and sometimes the passes a config runs after it."""
    pick = lambda *xs: draw(st.sampled_from(xs))  # noqa: E731
    steps: list[tuple[str, dict[str, object]]] = []
    if draw(st.booleans()):
        steps.append(("pad", _options(draw, "pad")))
    steps += [
        ("autotile", {"reqs": ("contraction",), "outer_set": ("tiles",),
                      "inner_set": ("tile", "contraction"),
                      "max_total_size": pick(256, 1024, 4096),
                      "min_split_range": pick(1, 8), "only_po2": draw(st.booleans()),
                      "acc_idxs": draw(st.booleans())}),
        ("cache", {"reqs": ("tile",), "dirs": ("in",), "mem_loc": "L2", "xfer_loc": "CPU",
                   "row_pad": pick(0, 4)}),
        ("hoist", {**_options(draw, "hoist"), "reqs": ("tiles",)}),
    ]
    steps += [(kind, _options(draw, kind))
              for kind in ("stencil", "fold_init", "threads") if draw(st.booleans())]
    return tuple(PassEntry(f"{kind}_{k}", kind, REGISTRY[kind].options(**opts))
                 for k, (kind, opts) in enumerate(steps))


@settings(max_examples=_EXAMPLES // 3, deadline=None, derandomize=_EXAMPLES == 150,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(template=st.sampled_from(["matmul", "matmul_relu", "conv", "depthwise"]),
       sizes=st.tuples(*[st.integers(4, 40)] * 3),
       dtype=st.sampled_from(["float32", "float64", "int32"]),
       passes=hoist_pipelines(), seed=st.integers(0, 2**16), in_c=st.booleans())
def test_hoist_on_random_packed_tiles(template: str, sizes: tuple[int, int, int], dtype: str,
                                      passes: tuple[PassEntry, ...], seed: int,
                                      in_c: bool) -> None:
    """``hoist`` on tiles large enough to have several tile loops (the main test's programs
    rarely do): verifier and interpreter after every pass, and C."""
    source, shapes = TEMPLATES[template]
    rng = np.random.default_rng(seed)
    arrays = {n: random_array(rng, s, dtype) for n, s in shapes(*sizes).items()}
    program = stripe.lower(source, arrays)
    config = Config("hoist", Target("hoist"), passes=passes)
    final, trace = run_pipeline(program, config, verify=True, check=True, inputs=arrays)
    ran = [e for _, e in pipeline(config)]  # the back end's decision passes last
    k = next(i for i, e in enumerate(ran) if e.type == "hoist")
    event("hoist changed the program" if trace[k + 1][1] is not trace[k][1]
          else "hoist left the program alone")
    assert [name for name, _ in trace] == ["lower", *(e.name for e in ran)]
    if in_c:
        want = stripe.interpret(program, arrays)
        compiled = compile_program(final, trace, decided=True)
        compiled.fill_byte = 0xFF
        for _ in range(_THREADED_CALLS if "#pragma omp" in compiled.c_source else 1):
            got = compiled(**arrays)
            for name in want:
                np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-4,
                                           err_msg=f"{name} of {source}")
