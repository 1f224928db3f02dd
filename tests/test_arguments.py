"""The argument contract of the Python entry points: ``Program.run`` and ``Program(...)``,
``stripe.compile``, ``compile_program``, ``stripe.lower`` and ``stripe.interpret``.

Every wrong argument is a typed error raised before anything runs or is written: an
``ArgumentTypeError`` (a ``TypeError``) for a wrong type, an ``ArgumentError`` (a
``ValueError``) for a wrong value, both ``StripeError`` and naming the argument; unusual but
valid arrays (strided, read-only, unaligned, Fortran-ordered, memory-mapped, one array for
two inputs) give the same results as plain ones.
"""

from __future__ import annotations

import numpy as np
import pytest

import stripe
from stripe.arrays import ArgumentError, ArgumentTypeError, empty
from stripe.compiler import compile_program
from stripe.errors import LimitError, StripeError

N = 64
SOURCE = "function (A[N], B[N]) -> (C, D) { C = A + B; D = A * B; }"


@pytest.fixture(scope="module")
def prog() -> stripe.Program:
    return stripe.compile(SOURCE, {"A": ((N,), "float32"), "B": ((N,), "float32")})


@pytest.fixture
def ab() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {k: rng.standard_normal(N).astype(np.float32) for k in "AB"}


def _want(ab: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"C": ab["A"] + ab["B"], "D": ab["A"] * ab["B"]}


def _same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        np.testing.assert_array_equal(got[k], v)


def _out() -> dict[str, np.ndarray]:
    return {k: np.full(N, np.nan, np.float32) for k in "CD"}


# --- Program.run: the mapping arguments ------------------------------------------------------

@pytest.mark.parametrize("inputs", [None, [], "A", 3, {"A", "B"}, (("A", 1),), object()])
def test_inputs_that_are_not_a_mapping(prog, inputs):
    with pytest.raises(ArgumentTypeError, match="inputs must be a mapping"):
        prog.run(inputs)
    assert prog._fast is None or prog._fast(inputs, None) is None  # declines, no raise


def test_inputs_given_as_a_list_of_arrays_or_pairs(prog, ab):
    for inputs in ([ab["A"], ab["B"]], list(ab.items())):
        with pytest.raises(ArgumentTypeError, match="inputs must be a mapping"):
            prog.run(inputs)


@pytest.mark.parametrize("out", [[], ["C"], "C", 0, [np.zeros(N, np.float32)], object(),
                                 (("C", np.zeros(N, np.float32)),)])
def test_out_that_is_not_a_mapping(prog, ab, out):
    with pytest.raises(ArgumentTypeError, match="out must be None or a mapping"):
        prog.run(ab, out=out)
    if prog._fast is not None:
        assert prog._fast(ab, out) is None


def test_names_that_are_not_strings(prog, ab):
    with pytest.raises(ArgumentTypeError, match="inputs: names must be strings, got int 1"):
        prog.run({**ab, 1: ab["A"]})
    with pytest.raises(ArgumentTypeError, match="out: names must be strings"):
        prog.run(ab, out={("C",): np.zeros(N, np.float32)})


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("B"), "missing input.*B.*the program takes A, B"),
    (lambda d: d.update(Z=d["A"]), "unexpected input.*Z"),
    (lambda d: d.update({"": d["A"]}), "unexpected input.*''"),
    (lambda d: d.update(C=d["A"]), "unexpected input.*C"),  # an output is not an input
])
def test_missing_and_extra_names(prog, ab, change, message):
    change(ab)
    with pytest.raises(ArgumentError, match=message):
        prog.run(ab)


def test_out_names_that_are_not_outputs(prog, ab):
    with pytest.raises(ArgumentError, match="out: A is not an output"):
        prog.run(ab, out={"A": np.zeros(N, np.float32)})
    with pytest.raises(ArgumentError, match="out: 'x y', Z are not outputs"):
        prog.run(ab, out={"Z": np.zeros(N, np.float32), "x y": np.zeros(N, np.float32)})


# --- Program.run: the arrays -----------------------------------------------------------------

@pytest.mark.parametrize("value, error, message", [
    ([0.0] * N, ArgumentTypeError, "input A: expected a numpy array, got list"),
    (None, ArgumentTypeError, "input A: expected a numpy array, got NoneType"),
    ("A", ArgumentTypeError, "input A: expected a numpy array, got str"),
    (np.float32(1), ArgumentTypeError, "got float32 \\(numpy.asarray"),
    (object(), ArgumentTypeError, "got object"),
    (np.zeros(N, np.float64), ArgumentError, "input A has dtype float64, compiled for float32"),
    (np.zeros(N, np.int32), ArgumentError, "dtype int32"),
    (np.zeros(N, object), ArgumentError, "dtype object"),
    (np.zeros(N, np.complex64), ArgumentError, "dtype complex64"),
    (np.zeros(N, ">f4"), ArgumentError, "dtype >f4"),
    (np.zeros(N, np.float16), ArgumentError, "dtype float16"),
    (np.zeros((N, 1), np.float32), ArgumentError, r"input A has shape \(64, 1\), compiled "
                                                  r"for \(64,\)"),
    (np.zeros(N + 1, np.float32), ArgumentError, "shape"),
    (np.zeros((), np.float32), ArgumentError, "shape"),
    (np.zeros(0, np.float32), ArgumentError, "shape"),
    (np.broadcast_to(np.float32(1), (2**40,)), ArgumentError, "shape"),
    (np.ma.masked_array(np.zeros(N, np.float32), mask=np.arange(N) % 2 == 0), ArgumentError,
     "masked array"),
])
def test_input_arrays_of_a_wrong_kind(prog, ab, value, error, message):
    ab["A"] = value
    out = _out()
    with pytest.raises(error, match=message):
        prog.run(ab, out=out)
    assert all(np.isnan(v).all() for v in out.values())  # nothing written


@pytest.mark.parametrize("make, error, message", [
    (lambda: [0.0] * N, ArgumentTypeError, "out C: expected a numpy array, got list"),
    (lambda: np.zeros(N, np.float64), ArgumentError, "out C: expected shape"),
    (lambda: np.zeros((1, N), np.float32), ArgumentError, "out C: expected shape"),
    (lambda: np.zeros(2 * N, np.float32)[::2], ArgumentError, "C-contiguous and writable"),
    (lambda: np.ma.masked_array(np.zeros(N, np.float32)), ArgumentError, "masked array"),
])
def test_out_arrays_of_a_wrong_kind(prog, ab, make, error, message):
    with pytest.raises(error, match=message):
        prog.run(ab, out={"C": make()})


def test_read_only_outputs_are_refused(prog, ab):
    c = np.zeros(N, np.float32)
    c.setflags(write=False)
    with pytest.raises(ArgumentError, match="out C: the array must be C-contiguous and writable"):
        prog.run(ab, out={"C": c})


def test_outputs_that_alias_an_argument_are_refused(prog, ab):
    pool = np.zeros(4 * N, np.float32)
    cases = [({"C": ab["A"]}, "out C: the array shares memory with A"),
             ({"D": ab["B"]}, "out D: the array shares memory with B"),
             ({"C": pool[:N], "D": pool[:N]}, "out D: the array shares memory with C"),
             ({"C": pool[:N], "D": pool[N - 1:2 * N - 1]}, "shares memory with C")]
    for out, message in cases:
        before = {k: v.copy() for k, v in ab.items()}
        with pytest.raises(ArgumentError, match=message):
            prog.run(ab, out=out)
        _same(ab, before)  # the inputs are untouched
    whole = np.concatenate([ab["A"], ab["B"]])
    inputs = {"A": whole[:N], "B": whole[N:]}
    with pytest.raises(ArgumentError, match="shares memory with B"):
        prog.run(inputs, out={"C": np.zeros(N, np.float32), "D": whole[N:]})
    # touching but disjoint: fine
    got = prog.run(ab, out={"C": pool[:N], "D": pool[N:2 * N]})
    _same(got, _want(ab))


def _unaligned(v: np.ndarray, shift: int) -> np.ndarray:
    raw = np.zeros(v.nbytes + 64, np.uint8)
    out = raw[shift:shift + v.nbytes].view(v.dtype).reshape(v.shape)
    out[...] = v
    return out


def test_unusual_but_valid_inputs_give_the_same_results(prog, ab, tmp_path):
    want = _want(ab)
    wide = np.zeros((N, 3), np.float32)
    wide[:, 1] = ab["A"]
    ro = ab["B"].copy()
    ro.setflags(write=False)
    mm = np.lib.format.open_memmap(tmp_path / "a.npy", mode="w+", dtype=np.float32, shape=(N,))
    mm[...] = ab["A"]
    odd = _unaligned(ab["A"], 1)
    assert not odd.flags.aligned
    cases = [{"A": wide[:, 1], "B": ab["B"]},            # strided
             {"A": ab["A"], "B": ro},                    # read-only
             {"A": mm, "B": ab["B"]},                    # memory-mapped (an ndarray subclass)
             {"A": odd, "B": _unaligned(ab["B"], 3)}]    # not on an element boundary
    for inputs in cases:
        _same(prog.run(inputs), want)
        _same(prog(**inputs), want)
    same = prog.run({"A": ab["A"], "B": ab["A"]})  # one array for both inputs
    _same(same, {"C": ab["A"] + ab["A"], "D": ab["A"] * ab["A"]})


def test_outputs_not_on_an_element_boundary_are_written(prog, ab):
    out = {"C": _unaligned(np.zeros(N, np.float32), 1),
           "D": _unaligned(np.zeros(N, np.float32), 6)}
    assert not out["C"].flags.aligned and not out["D"].flags.aligned
    got = prog.run(ab, out=out)
    assert got["C"] is out["C"] and got["D"] is out["D"]
    _same(got, _want(ab))
    partial = prog.run(ab, out={"D": out["D"]})
    assert partial["D"] is out["D"]
    _same(partial, _want(ab))


def test_an_empty_out_is_no_out(prog, ab):
    _same(prog.run(ab, out={}), _want(ab))
    _same(prog.run(ab, out=None), _want(ab))


def test_positional_arguments_to_a_program(prog, ab):
    with pytest.raises(ArgumentTypeError, match=r"by name: prog\(A=..., B=...\)"):
        prog(ab)
    with pytest.raises(ArgumentTypeError, match="2 positional arguments"):
        prog(ab["A"], ab["B"])
    _same(prog(**ab), _want(ab))


def test_scalar_inputs_are_0d_arrays():
    prog = stripe.compile("function (A[N], S[]) -> (C) { C = A * S; }",
                          {"A": ((8,), "float32"), "S": ((), "float32")})
    a = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(prog(A=a, S=np.array(2, np.float32))["C"], 2 * a)
    for s in (np.float32(2), 2.0):
        with pytest.raises(ArgumentTypeError, match="input S: expected a numpy array"):
            prog(A=a, S=s)
    with pytest.raises(ArgumentError, match=r"input S has shape \(1,\), compiled for \(\)"):
        prog(A=a, S=np.ones(1, np.float32))


def test_the_errors_are_builtin_errors_too(prog, ab):
    with pytest.raises(TypeError):
        prog.run([ab["A"]])
    with pytest.raises(ValueError):
        prog.run({"A": ab["A"]})


# --- memory a call allocates ------------------------------------------------------------------

def test_compile_program_refuses_programs_over_the_memory_limit(monkeypatch):
    src = "function (A[N], B[M]) -> (C) { C[i, j : N, M] = =(A[i] * B[j]); }"
    program = stripe.lower(src, {"A": ((300,), "float32"), "B": ((200,), "float32")})
    text = stripe.print_ir(program)
    monkeypatch.setenv("STRIPE_MAX_BYTES", "100KiB")
    for block in (program, stripe.parse_ir(text)):
        with pytest.raises(LimitError, match="the largest: 'C'"):
            compile_program(block)


def test_outputs_over_the_memory_limit_are_refused_before_allocating(monkeypatch):
    """A Program whose outputs total more than STRIPE_MAX_BYTES when it is made (as one
    served from the pipeline cache is) allocates nothing: a call that would raises
    LimitError naming the limit; outputs given with out= are written; a raised limit is
    read again."""
    src = "function (A[N], B[M]) -> (C) { C[i, j : N, M] = =(A[i] * B[j]); }"
    built = stripe.compile(src, {"A": ((300,), "float32"), "B": ((200,), "float32")})
    monkeypatch.setenv("STRIPE_MAX_BYTES", "100KiB")
    prog = stripe.Program(built.c_program, built.module, built.flags, built.ir, built.trace)
    assert prog._fast is None
    a, b = np.ones(300, np.float32), np.arange(200, dtype=np.float32)
    with pytest.raises(LimitError, match=r"240000 bytes .* the limit of 102400 bytes"):
        prog(A=a, B=b)
    c = np.zeros((300, 200), np.float32)
    assert prog.run({"A": a, "B": b}, out={"C": c})["C"] is c
    np.testing.assert_array_equal(c, np.outer(a, b))
    monkeypatch.setenv("STRIPE_MAX_BYTES", "1MiB")
    np.testing.assert_array_equal(prog(A=a, B=b)["C"], np.outer(a, b))


def test_input_copies_count_against_the_memory_limit(monkeypatch):
    a = np.ones(1000, np.float32)
    prog = stripe.compile("function (A[N]) -> (C) { C = A + 1.0; }", {"A": a})
    monkeypatch.setenv("STRIPE_MAX_BYTES", "6000")  # the output (4000 bytes), not a copy too
    np.testing.assert_array_equal(prog(A=a)["C"], a + 1)
    strided = np.ones(2000, np.float32)[::2]
    with pytest.raises(LimitError, match="copies of inputs"):
        prog(A=strided)
    np.testing.assert_array_equal(prog.run({"A": strided}, out={"C": empty(1000)})["C"], a + 1)


# --- stripe.compile and compile_program -------------------------------------------------------

@pytest.mark.parametrize("args, kwargs, message", [
    ((None, {"A": ((N,), "float32")}), {}, "source must be Tile text"),
    ((SOURCE.encode(), {}), {}, "source must be Tile text.*bytes"),
    ((SOURCE, None), {}, "inputs must be given with Tile text"),
    ((SOURCE, [("A", ((N,), "float32"))]), {}, "inputs must be a mapping"),
    ((SOURCE, [np.zeros(N, np.float32)]), {}, "inputs must be a mapping"),
    ((SOURCE, {"A": ((N,), "float32"), "B": ((N,), "float32")}, 3), {}, "target must be None"),
    ((SOURCE, {"A": ((N,), "float32"), "B": ((N,), "float32")}, b"cpu_avx2"), {},
     "target must be None"),
    ((SOURCE, {"A": ((N,), "float32"), "B": ((N,), "float32")}, "cpu_generic"),
     {"verify": "no"}, "verify must be True or False"),
    ((SOURCE, {"A": ((N,), "float32"), "B": ((N,), "float32")}, "cpu_generic"),
     {"check": 1}, "check must be True or False"),
])
def test_compile_argument_types(args, kwargs, message):
    with pytest.raises(ArgumentTypeError, match=message):
        stripe.compile(*args, **kwargs)


@pytest.mark.parametrize("inputs, error", [
    ({"A": ((N,), "float32")}, stripe.TileError),                          # B missing
    ({"A": ((N,), "float32"), "B": ((N,), "float32"), "Z": ((1,), "float32")},
     stripe.TileError),                                                    # Z unknown
    ({"A": ((N,), "float33"), "B": ((N,), "float32")}, stripe.TileError),
    ({"A": ((-1,), "float32"), "B": ((-1,), "float32")}, stripe.TileError),
    ({"A": ((N, 2), "float32"), "B": ((N,), "float32")}, stripe.TileError),
    ({"A": ((2.5,), "float32"), "B": ((N,), "float32")}, stripe.TileError),
    ({"A": None, "B": ((N,), "float32")}, stripe.TileError),
    ({"A": np.zeros(N, object), "B": ((N,), "float32")}, stripe.TileError),
    ({"A": ((2**62,), "float32"), "B": ((2**62,), "float32")}, LimitError),
    ({"A": ((2**70,), "float32"), "B": ((2**70,), "float32")}, LimitError),
])
def test_compile_and_lower_refuse_bad_input_specs(inputs, error):
    for entry in (stripe.lower, stripe.compile):
        with pytest.raises(error):
            entry(SOURCE, inputs)


def test_compile_accepts_paths_and_mappings():
    from pathlib import Path
    from types import MappingProxyType

    import stripe.hwconfigs as hw

    inputs = MappingProxyType({"A": ((N,), "float32"), "B": np.zeros(N, np.float32)})
    prog = stripe.compile(SOURCE, inputs, Path(hw.__file__).parent / "cpu_generic.yaml",
                          verify=np.bool_(True))
    assert prog.output_names == ("C", "D")


def test_compile_program_argument_types():
    program = stripe.lower(SOURCE, {"A": ((N,), "float32"), "B": ((N,), "float32")})
    with pytest.raises(ArgumentTypeError, match="program must be a Block"):
        compile_program(SOURCE)
    with pytest.raises(ArgumentTypeError, match="flags must be a sequence of strings"):
        compile_program(program, flags="-O2")
    with pytest.raises(ArgumentTypeError, match="flags must be a sequence of strings"):
        compile_program(program, flags=("-O2", 3))
    with pytest.raises(ArgumentTypeError, match="flags must be a sequence"):
        compile_program(program, flags=3)
    with pytest.raises(ArgumentTypeError, match="target must be a Target"):
        compile_program(program, target="cpu_generic")
    with pytest.raises(ArgumentTypeError, match="vector must be None or a Compute"):
        compile_program(program, vector=8)


# --- stripe.interpret ------------------------------------------------------------------------

@pytest.mark.parametrize("block, arrays", [
    ("#program", {}), (None, {}),
    ("lowered", None), ("lowered", [np.zeros(N, np.float32)] * 2),
    ("lowered", {"A": np.zeros(N, np.float32)}),
    ("lowered", {"A": np.zeros(N, np.float64), "B": np.zeros(N, np.float32)}),
    ("lowered", {"A": np.zeros(N + 1, np.float32), "B": np.zeros(N, np.float32)}),
    ("lowered", {"A": [0.0] * N, "B": np.zeros(N, np.float32)}),
    ("lowered", {1: np.zeros(N, np.float32), "B": np.zeros(N, np.float32)}),
])
def test_interpret_refuses_wrong_arguments_with_typed_errors(block, arrays):
    if block == "lowered":
        block = stripe.lower(SOURCE, {"A": ((N,), "float32"), "B": ((N,), "float32")})
    with pytest.raises(StripeError):
        stripe.interpret(block, arrays)
