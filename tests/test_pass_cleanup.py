"""cleanup: before/after Stripe text, negative cases, and interpreter equivalence."""

from __future__ import annotations

import numpy as np
from passcheck import TARGET, check_pass

from stripe import interpret, lower, verify
from stripe.ir import Block, Special, Store
from stripe.passes import cleanup


def program(buffers: str, kernels: str) -> str:
    """A ``#program`` whose ``main`` views every buffer whole and runs ``kernels``.

    ``buffers`` has one ``<in|out|tmp> <name> <shape>`` per line, e.g. ``in A fp32:I(4):(1)``.
    """
    root, views = [], []
    for line in buffers.strip().splitlines():
        kind, name, shape = line.split(maxsplit=2)
        zeros = ", ".join("0" for _ in shape.split(":")[1].split(","))
        if kind == "tmp":
            root.append(f"#tmp none new {name}[{zeros}] {shape}")
            views.append(f"inout {name}[{zeros}] {shape}")
        else:
            root.append(f"#user {kind} new {name}[{zeros}] {shape}")
            views.append(f"{kind} {name}[{zeros}] {shape}")
    return (f"#program block []:1 ( // prog\n{chr(10).join(root)}\n) {{\n"
            f"0: #main block []:1 ( // main\n{chr(10).join(views)}\n) {{\n{kernels}\n}}\n}}\n")


def run(text: str, **options: object) -> tuple[Block, Block]:
    return check_pass(cleanup.run, text, cleanup.Options(**options), tol=0)


def assert_rewrites(before: str, expected: str, **options: object) -> None:
    check_pass(cleanup.run, before, cleanup.Options(**options), expected=expected, tol=0)


def assert_unchanged(text: str, **options: object) -> None:
    check_pass(cleanup.run, text, cleanup.Options(**options), unchanged=True, tol=0)


BUFS = """
in A fp32:I(4):(1)
out O fp32:I(4):(1)
"""


def test_dead_scalars_go():
    before = program(BUFS, """
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: $unused = load(A)
            2: $i = index(i)
            3: $c = (fp32)2.0
            4: $dead = mul:fp32($unused, $c)
            5: O = store($a)
        }""")
    expected = program(BUFS, """
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            5: O = store($a)
        }""")
    assert_rewrites(before, expected)


def test_constants_fold():
    before = program(BUFS, """
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $two = (fp32)2.0
            1: $three = (i32)3
            2: $six = mul:fp32($two, $three)
            3: $yes = cmp_lt:bool($two, $three)
            4: $a = load(A)
            5: $pick = cond:fp32($yes, $a, $six)
            6: $sum = add:fp32($pick, $six)
            7: O = store($sum)
        }""")
    expected = program(BUFS, """
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            2: $six = (fp32)6.0
            4: $a = load(A)
            5: $pick = assign:fp32($a)
            6: $sum = add:fp32($pick, $six)
            7: O = store($sum)
        }""")
    assert_rewrites(before, expected)


def test_fold_respects_dtype_conversions():
    before = program("out O i8:I(1):(1)", """
        0: #kernel block []:1 ( // k
            out O[0] i8:I(1):(1)
        ) {
            0: $a = (fp32)2.75
            1: $b = (i32)100
            2: $c = add:i8($a, $b)
            3: O = store($c)
        }""")
    expected = program("out O i8:I(1):(1)", """
        0: #kernel block []:1 ( // k
            out O[0] i8:I(1):(1)
        ) {
            2: $c = (i8)102
            3: O = store($c)
        }""")
    assert_rewrites(before, expected)


def test_inexact_operations_do_not_fold():
    assert_unchanged(program(BUFS, """
        0: #kernel block [i:4] ( // k
            out O[i] fp32:I(1):(1)
        ) {
            0: $one = (fp32)1.0
            1: $three = (fp32)3.0
            2: $third = div:fp32($one, $three)
            3: $e = exp:fp32($third)
            4: O = store($e)
        }"""))


def test_fold_constants_can_be_switched_off():
    assert_unchanged(program(BUFS, """
        0: #kernel block [i:4] ( // k
            out O[i] fp32:I(1):(1)
        ) {
            0: $one = (fp32)1.0
            1: $two = add:fp32($one, $one)
            2: O = store($two)
        }"""), fold_constants=False)


def test_write_only_tmp_and_its_producer_go():
    bufs = BUFS + "tmp T fp32:I(4):(1)\n"
    before = program(bufs, """
        0: #kernel block [i:4] ( // k0
            in A[i] fp32:I(1):(1)
            out T[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: $t = mul:fp32($a, $a)
            2: T = store($t)
        }
        1: #kernel block [i:4] ( // k1
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: O = store($a)
        }""")
    expected = program(BUFS, """
        1: #kernel block [i:4] ( // k1
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: O = store($a)
        }""")
    assert_rewrites(before, expected)


def test_stores_into_outputs_stay_even_when_overwritten():
    # O is written twice; the first store is dead in fact, but O is visible: keep both.
    assert_unchanged(program(BUFS, """
        0: #kernel block [i:4] ( // k0
            out O[i] fp32:I(1):(1)
        ) {
            0: $z = (fp32)0.0
            1: O = store($z)
        }
        1: #kernel block [i:4] ( // k1
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: O = store($a)
        }"""))


def test_unused_refinements_go_but_main_keeps_user_views():
    bufs = BUFS + "in B fp32:I(4):(1)\n"
    before = program(bufs, """
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            in B[i] fp32:I(1):(1)
            none new S[0] fp32:I(3):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: O = store($a)
        }""")
    expected = program(bufs, """
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: O = store($a)
        }""")
    assert_rewrites(before, expected)


def test_range_one_indexes_are_substituted_or_dropped():
    before = program(BUFS, """
        0: #kernel block [i:4, z:1] ( // k
            in A[i + z] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: block [j:1, p = i:1, q = z:1] ( // inner
                -3 + j + p + q >= 0
                in A[j] fp32:I(1):(1)
                out O[j] fp32:I(1):(1)
            ) {
                0: $a = load(A)
                1: $j = index(j + p)
                2: $f = cast:fp32($j)
                3: $s = add:fp32($a, $f)
                4: O = store($s)
            }
        }""")
    expected = program(BUFS, """
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: block [p = i:1] ( // inner
                -3 + p >= 0
                in A[0] fp32:I(1):(1)
                out O[0] fp32:I(1):(1)
            ) {
                0: $a = load(A)
                1: $j = index(p)
                2: $f = cast:fp32($j)
                3: $s = add:fp32($a, $f)
                4: O = store($s)
            }
        }""")
    assert_rewrites(before, expected)


def test_blocks_that_never_run_go():
    before = program(BUFS, """
        0: #kernel block [i:4] ( // empty_body
            out O[i] fp32:I(1):(1)
        ) {
        }
        1: #kernel block [i:4] ( // infeasible
            -5 + i >= 0
            out O[i] fp32:I(1):(1)
        ) {
            0: $z = (fp32)0.0
            1: O = store($z)
        }
        2: #kernel block [i:4, z:1] ( // infeasible_after_substitution
            -1 + z >= 0
            out O[i] fp32:I(1):(1)
        ) {
            0: $z = (fp32)0.0
            1: O = store($z)
        }
        3: #kernel block [i:4] ( // live
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: O = store($a)
        }""")
    expected = program(BUFS, """
        3: #kernel block [i:4] ( // live
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: O = store($a)
        }""")
    assert_rewrites(before, expected)


def test_feasible_constraints_and_passed_in_indexes_stay():
    assert_unchanged(program(BUFS, """
        0: #kernel block [x:2] ( // outer
            in A[2*x] fp32:I(2):(1)
            out O[2*x] fp32:I(2):(1)
        ) {
            0: block [i:2, x0 = 2*x:1] ( // inner
                2 - i - x0 >= 0
                in A[i] fp32:I(1):(1)
                out O[i] fp32:I(1):(1)
            ) {
                0: $a = load(A)
                1: O = store($a)
            }
        }"""))


def test_main_stays_even_when_empty():
    before = program(BUFS, """
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
        }""")
    expected = program(BUFS, "")
    assert_rewrites(before, expected)


def test_reqs_and_exclude_limit_the_blocks_cleaned():
    text = program(BUFS, """
        0: #kernel #keep block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: $dead = load(A)
            2: O = store($a)
        }""")
    assert_unchanged(text, exclude=("keep",))
    assert_unchanged(text, reqs=("main",))
    _, after = run(text, reqs=("kernel",))
    assert len(after.sub_blocks[0].sub_blocks[0].stmts) == 2


def test_a_clean_program_is_returned_as_the_same_object():
    assert_unchanged(program(BUFS + "tmp T fp32:I(4):(1)\n", """
        0: #kernel block [i:4] ( // k0
            in A[i] fp32:I(1):(1)
            out T[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: T = store($a)
        }
        1: #kernel block [i:4] ( // k1
            in T[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $t = load(T)
            1: O = store($t)
        }"""))


def test_lowered_programs_survive(rng: np.random.Generator):
    src = "function (A[N], B[N]) -> (C) { T = A * B; U = T + A; C = U; }"
    before = lower(src, {"A": ((5,), "float32"), "B": ((5,), "float32")})
    after = cleanup.run(before, cleanup.Options(), TARGET)
    verify(after)
    arrays = {"A": rng.standard_normal(5).astype("float32"),
              "B": rng.standard_normal(5).astype("float32")}
    np.testing.assert_array_equal(interpret(after, arrays)["C"],
                                  interpret(before, arrays)["C"])


def test_cond_folds_on_the_converted_condition():
    # 256 as i8 is 0: the condition is false although the Python value is truthy.
    before = program(BUFS, """
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $c = (i8)256
            1: $a = load(A)
            2: $z = (fp32)0.5
            3: $pick = cond:fp32($c, $a, $z)
            4: O = store($pick)
        }""")
    expected = program(BUFS, """
        0: #kernel block [i:4] ( // k
            out O[i] fp32:I(1):(1)
        ) {
            3: $pick = (fp32)0.5
            4: O = store($pick)
        }""")
    assert_rewrites(before, expected)


def test_substitute_indexes_reaches_banks_and_passed_in_affines():
    from stripe.affine import Affine
    from stripe.irparser import parse_ir
    from stripe.passes.transforms.substitute import substitute_indexes

    block = parse_ir("""
block [x:4]:4 ( // b
    1 - x >= 0
    in X<SRAM[x]>[x] fp32:I(1):(1)
) {
    0: $i = index(x)
    1: block [y = x:1]:1 ( // c
        in X[0] fp32:I(1):(1)
    ) {
        0: $x = load(X)
    }
}
""")
    out = substitute_indexes(block, {"x": Affine.of("x") + 1})
    [r] = out.refs
    assert str(r.access[0]) == "1 + x" and str(r.location.bank) == "1 + x"
    assert [str(c) for c in out.constraints] == ["-x"]
    assert str(out.stmts[0].from_) == "1 + x"
    assert str(out.stmts[1].idxs[0].affine) == "1 + x"


SPECIAL_CHAIN = program(BUFS + "tmp U fp32:I(4):(1)\ntmp T fp32:I(4):(1)\n", """
    0: #kernel block [i:4] ( // k0
        in A[i] fp32:I(1):(1)
        out T[i] fp32:I(1):(1)
    ) {
        0: $a = load(A)
        1: T = store($a)
    }
    1: #kernel block []:1 ( // k1
        in T[0] fp32:I(4):(1)
        out U[0] fp32:I(4):(1)
    ) {
        0: U = reshape(T)
    }
    2: #kernel block [i:4] ( // k2
        in A[i] fp32:I(1):(1)
        out O[i] fp32:I(1):(1)
    ) {
        0: $a = load(A)
        1: O = store($a)
    }""")


def test_a_write_only_chain_through_a_special_goes():
    """``U`` is write-only; the special writing it is its producer's (``T``'s) only reader,
    so ``T`` is write-only too once it goes: both buffers, their kernels and views go."""
    expected = program(BUFS, """
        2: #kernel block [i:4] ( // k2
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: O = store($a)
        }""")
    assert_rewrites(SPECIAL_CHAIN, expected)


def test_a_special_that_goes_frees_its_inputs_in_the_same_sweep(monkeypatch):
    """One sweep over the root's allocations sees the reads that the removal of an earlier
    one's special took away: ``U`` (declared first) goes with its special, then ``T``,
    whose only reader that special was, loses its store in the same round."""
    monkeypatch.setattr(cleanup, "_MAX_ROUNDS", 1)
    _, after = run(SPECIAL_CHAIN)
    stmts = [s for _, b in after.walk() for s in b.stmts]
    assert not any(isinstance(s, Special) for s in stmts)
    assert not any(isinstance(s, Store) and s.into == "T" for s in stmts)


def test_the_clock_is_consulted_for_every_child_and_buffer(monkeypatch):
    """The compile-time budget can stop the pass inside one block: ``check_time`` runs with
    the block's path for every child block and every allocation it examines."""
    from benchmarks.compile_time import chain

    paths: list[str] = []
    monkeypatch.setattr(cleanup, "check_time", paths.append)
    cleanup.run(lower(*chain(30, side=4)), cleanup.Options(), TARGET)
    assert paths.count("program/main") >= 30  # its 30 kernels
    assert paths.count("program") >= 29 + 3  # the root's 29 tmps and 3 user buffers


def test_an_equal_program_costs_the_same_the_second_time():
    """What the pass remembers about blocks is keyed by the blocks themselves, not by their
    value: a program equal to one cleaned before (lowered again) is not compared whole
    against it on every lookup."""
    import time

    from benchmarks.compile_time import chain

    source, inputs = chain(400, side=4)
    times = []
    for _ in range(2):
        program = lower(source, inputs)
        start = time.process_time()
        cleanup.run(program, cleanup.Options(), TARGET)
        times.append(time.process_time() - start)
    assert times[1] < 3 * times[0] + 0.3, times
