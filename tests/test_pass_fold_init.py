"""fold_init and fresh views: before/after IR, refusals, the interpreter's and the C back
end's fresh semantics, and cpu_avx2 programs against numpy at odd sizes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from passcheck import TARGET, run_and_check

import stripe
from stripe import interpret, lower, parse_ir, print_ir, verify
from stripe.compiler import compile_program
from stripe.errors import InterpreterError, VerifyError
from stripe.ir import Block
from stripe.passes import autotile, cache, fold_init, threads
from stripe.passes.transforms.tile import apply_tile

MATMUL = "function (A[M, K], B[K, N]) -> (O) { O[m, n : M, N] = +(A[m, k] * B[k, n]); }"
MAXPOOL = "function (I[N]) -> (O) { O[i : (N + 1) / 2] = >(I[2 * i + j]), j < 2; }"
CONV = """function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (O) {
    O[n, x, y, co : N, X, Y, CO] = +(I[n, x + i - 1, y + j - 1, ci] * F[i, j, ci, co]);
}"""
DEPTHWISE = """function (I[N, X, Y, C], F[KX, KY, C]) -> (O) {
    O[n, x, y, c : N, X, Y, C] = +(I[n, x + i - 1, y + j - 1, c] * F[i, j, c]);
}"""
OPTIONS = fold_init.Options(reqs=("contraction",))


def matmul(m: int = 3, k: int = 4, n: int = 5) -> Block:
    return lower(MATMUL, {"A": ((m, k), "float32"), "B": ((k, n), "float32")})


def fresh_views(block: Block) -> list[str]:
    return [f"{b.name}.{r.into}" for _, b in block.walk() for r in b.refs if r.fresh]


def test_flat_contraction_before_after() -> None:
    before = matmul()
    assert [s.name for s in before.sub_blocks[0].sub_blocks] == ["kernel_0", "kernel_1"]
    after = run_and_check(fold_init.run, before, OPTIONS)
    main = after.sub_blocks[0]
    assert [s.name for s in main.sub_blocks] == ["kernel_1"]  # the initialisation is gone
    assert fresh_views(after) == ["kernel_1.O"]
    assert "out fresh O[m, n]:add fp32:I(1, 1):(5, 1):4 B" in print_ir(after)


def test_text_round_trip() -> None:
    after = fold_init.run(matmul(), OPTIONS, TARGET)
    assert parse_ir(print_ir(after)) == after


def test_max_aggregation_folds_with_its_identity() -> None:
    before = lower(MAXPOOL, {"I": ((9,), "float32")})
    after = run_and_check(fold_init.run, before, OPTIONS)
    assert fresh_views(after) == ["kernel_1.O"]
    x = np.random.default_rng(1).standard_normal(9).astype(np.float32) - 10.0  # all < 0
    got = compile_program(after, [("fold_init", after)])(I=x)["O"]
    np.testing.assert_array_equal(got, np.maximum(x[0:9:2], np.append(x[1:9:2], -np.inf)))


def test_split_reduction_is_refused() -> None:
    """Tiling k makes each element the sum of several instances of the inner block."""
    before = matmul(6, 8, 4)
    main = before.sub_blocks[0]
    tiled = apply_tile(main.sub_blocks[1], {"m": 3, "k": 4}, ancestors=(before, main))
    program = before.replace(stmts=(main.replace(stmts=(main.stmts[0], tiled)),))
    verify(program)
    assert fold_init.run(program, OPTIONS, TARGET) is program


def test_whole_reduction_tiles_fold() -> None:
    """Tiling only m and n: every element still belongs to one instance of the inner block."""
    before = matmul(7, 5, 9)
    main = before.sub_blocks[0]
    tiled = apply_tile(main.sub_blocks[1], {"m": 3, "n": 4}, ancestors=(before, main))
    program = before.replace(stmts=(main.replace(stmts=(main.stmts[0], tiled)),))
    after = run_and_check(fold_init.run, program, OPTIONS)
    assert fresh_views(after) == ["kernel_1_inner.O"]
    assert len(after.sub_blocks[0].sub_blocks) == 1


def replace_init(program: Block, text_from: str, text_to: str) -> Block:
    text = print_ir(program)
    assert text_from in text
    return parse_ir(text.replace(text_from, text_to))


def test_wrong_constant_is_refused() -> None:
    program = replace_init(matmul(), "$identity = (fp32)0.0", "$identity = (fp32)1.0")
    assert fold_init.run(program, OPTIONS, TARGET) is program


def test_partial_initialisation_is_refused() -> None:
    program = replace_init(matmul(), "block [i1:3, i2:5]:15", "block [i1:2, i2:5]:10")
    assert fold_init.run(program, OPTIONS, TARGET) is program


READ_BETWEEN = """#program
block []:1 ( // prog
    #user in new A[0] fp32:I(4):(1):16 B
    #user out new O[0] fp32:I(2):(1):8 B
    #user out new P[0] fp32:I(2):(1):8 B
) {
    0: #main
    block []:1 ( // main
        in A[0] fp32:I(4):(1):16 B
        out O[0] fp32:I(2):(1):8 B
        out P[0] fp32:I(2):(1):8 B
    ) {
        0: block [i:2]:2 ( // init
            out O[i] fp32:I(1):(1):4 B
        ) {
            0: $zero = (fp32)0.0
            1: O = store($zero)
        }
        1: #peek
        block [i:2]:2 ( // peek
            in O[i] fp32:I(1):(1):4 B
            out P[i] fp32:I(1):(1):4 B
        ) {
            0: $x = load(O)
            1: P = store($x)
        }
        2: #contraction
        block [i:2, j:2]:4 ( // sums
            in A[2*i + j] fp32:I(1):(1):4 B
            out O[i]:add fp32:I(1):(1):4 B
        ) {
            0: $a = load(A)
            1: O = store($a)
        }
    }
}
"""


def test_a_read_between_is_refused() -> None:
    """A block that reads O between the initialisation and the contraction sees the zeros."""
    program = parse_ir(READ_BETWEEN)
    verify(program)
    assert fold_init.run(program, OPTIONS, TARGET) is program
    without = parse_ir(READ_BETWEEN.replace("1: #peek", "1: #peek #contraction"))
    assert fold_init.run(without, OPTIONS, TARGET) is without  # peek reads: not a consumer either
    moved = READ_BETWEEN.split("        1: #peek")[0] + "        2: #contraction" + \
        READ_BETWEEN.split("        2: #contraction")[1]
    program = parse_ir(moved)
    after = run_and_check(fold_init.run, program, OPTIONS)
    assert fresh_views(after) == ["sums.O"]


def test_unselected_contraction_is_left_alone() -> None:
    program = matmul()
    assert fold_init.run(program, fold_init.Options(reqs=("nothing_has_this",)), TARGET) is program


# the semantics of fresh views ----------------------------------------------------------------

STALE = """#program
block []:1 ( // prog
    #user in new A[0] fp32:I(6):(1):24 B
    #user out new O[0] fp32:I(3):(1):12 B
) {
    0: #main
    block []:1 ( // main
        in A[0] fp32:I(6):(1):24 B
        out O[0] fp32:I(3):(1):12 B
    ) {
        0: block [i:3]:3 ( // stale
            out O[i] fp32:I(1):(1):4 B
        ) {
            0: $five = (fp32)5.0
            1: O = store($five)
        }
        1: block [s:WHOLE]:1 ( // sums
            in A[0] fp32:I(6):(1):24 B
            out O[0] fp32:I(3):(1):12 B
        ) {
            0: block [i:3, j:2]:6 ( // leaf
                in A[2*i + j] fp32:I(1):(1):4 B
                out fresh O[I_ACCESS]:add fp32:I(1):(1):4 B
            ) {
                0: $a = load(A)
                1: O = store($a)
            }
        }
    }
}
"""


def stale(whole: int = 1, access: str = "i") -> Block:
    text = STALE.replace("WHOLE", str(whole)).replace("I_ACCESS", access)
    program = parse_ir(text)
    verify(program)
    return program


def test_fresh_view_ignores_what_the_buffer_held() -> None:
    """The leaf's one instance starts its elements at 0: the stale 5s are not seen, by the
    interpreter nor by the C back end (the generic loop nest starts them first)."""
    program = stale()
    a = np.arange(6, dtype=np.float32)
    want = a[0::2] + a[1::2]
    np.testing.assert_array_equal(interpret(program, {"A": a})["O"], want)
    prog = compile_program(program, [("hand", program)])
    assert "leaf_fresh" in prog.c_source
    np.testing.assert_array_equal(prog(A=a)["O"], want)


def _fresh_loops(c_source: str) -> list[str]:
    """The indexes of the loops of the C block that starts the fresh views."""
    lines = c_source.split("{  /* block leaf_fresh */")[1].splitlines()
    loops, depth = [], 1
    for line in lines[1:]:
        if line.strip().startswith("for ("):
            loops.append(line.rsplit("/* ", 1)[1].rstrip(" */"))
        depth += line.count("{") - line.count("}")
        if depth == 0:
            return sorted(loops)
    raise AssertionError("no end of the fresh block")


def test_the_fresh_start_leaves_out_the_reduction() -> None:
    """The block that starts the fresh elements loops over the indexes the view uses (i),
    not over the reduction (j), which would only start each element again; a constraint on
    the reduction keeps it (the element is started only where a point exists)."""
    program = stale()
    a = np.arange(6, dtype=np.float32)
    prog = compile_program(program, [("hand", program)])
    assert _fresh_loops(prog.c_source) == ["i"]
    np.testing.assert_array_equal(prog(A=a)["O"], a[0::2] + a[1::2])
    text = STALE.replace("WHOLE", "1").replace("I_ACCESS", "i").replace(
        "block [i:3, j:2]:6 ( // leaf\n",
        "block [i:3, j:2]:6 ( // leaf\n                1 - j >= 0\n")
    program = parse_ir(text)
    verify(program)
    prog = compile_program(program, [("hand", program)])
    assert _fresh_loops(prog.c_source) == ["i", "j"]  # (the constraint became j's bound)
    np.testing.assert_array_equal(prog(A=a)["O"], a[0::2] + a[1::2])


def test_two_instances_storing_one_element_is_an_error() -> None:
    """Two instances of the leaf (the parent runs twice) store into the same elements: the
    verifier refuses it (exact, with isl), and so does the interpreter when run anyway."""
    program = parse_ir(STALE.replace("WHOLE", "2").replace("I_ACCESS", "i"))
    with pytest.raises(VerifyError, match=r"fresh refinement 'O': two instances") as e:
        verify(program)
    assert "main/sums/leaf" in str(e.value)
    with pytest.raises(InterpreterError, match=r"two instances.*fresh refinement 'O'") as e:
        interpret(program, {"A": np.zeros(6, np.float32)})
    assert "main/sums/leaf" in str(e.value)


def test_verifier_admits_instances_that_own_their_elements() -> None:
    """The parent's two points each store into their own half of O (a private buffer per
    point is also fine: an allocation in the parent)."""
    text = STALE.replace("block [s:WHOLE]:1", "block [s:3]:3").replace(
        "            in A[0] fp32:I(6):(1):24 B\n            out O[0] fp32:I(3):(1):12 B\n",
        "            in A[2*s] fp32:I(2):(1):8 B\n            out O[s] fp32:I(1):(1):4 B\n"
    ).replace("block [i:3, j:2]:6 ( // leaf", "block [j:2]:2 ( // leaf").replace(
        "in A[2*i + j]", "in A[j]").replace("I_ACCESS", "0")
    program = parse_ir(text)
    verify(program)
    a = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(interpret(program, {"A": a})["O"], a[0::2] + a[1::2])


def test_verifier_refuses_a_fresh_view_that_does_not_aggregate() -> None:
    text = STALE.replace("WHOLE", "1").replace("out fresh O[I_ACCESS]:add fp32",
                                               "out fresh O[i] fp32")
    with pytest.raises(VerifyError, match="must be an aggregating 'out' view"):
        verify(parse_ir(text))


def test_verifier_refuses_a_fresh_input() -> None:
    text = STALE.replace("WHOLE", "1").replace("I_ACCESS", "i").replace(
        "in A[2*i + j] fp32", "in fresh A[2*i + j] fp32")
    with pytest.raises(VerifyError, match="must be an aggregating 'out' view"):
        verify(parse_ir(text))


def test_verifier_refuses_a_fresh_view_seen_by_a_child() -> None:
    text = STALE.replace("WHOLE", "1").replace("I_ACCESS", "i").replace(
        "            out O[0] fp32:I(3):(1):12 B\n        ) {\n            0: block [i:3, j:2]",
        "            out fresh O[0]:add fp32:I(3):(1):12 B\n        ) {\n"
        "            0: block [i:3, j:2]")
    text = text.replace("out fresh O[i]:add fp32:I(1)", "out O[i]:add fp32:I(1)")
    with pytest.raises(VerifyError, match="viewed by child block 'leaf'"):
        verify(parse_ir(text))


# whole programs under cpu_avx2 ----------------------------------------------------------------

@pytest.mark.parametrize("source, shapes", [
    (MATMUL, {"A": (13, 7), "B": (7, 21)}),
    (CONV, {"I": (1, 9, 11, 5), "F": (3, 3, 5, 19)}),
    (DEPTHWISE, {"I": (1, 15, 13, 19), "F": (3, 3, 19)}),
])
def test_cpu_avx2_folds_and_matches_numpy(source: str, shapes: dict) -> None:
    rng = np.random.default_rng(3)
    x = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
    prog = stripe.compile(source, x, target="cpu_avx2", check=True)
    assert fresh_views(prog.ir), "the kernels cover their reductions whole"
    assert not [b for b in prog.ir.sub_blocks[0].sub_blocks if "init" in b.tags]
    want = stripe.compile(source, x)(**x)["O"]  # no passes: the lowered program in C
    np.testing.assert_allclose(prog(**x)["O"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(interpret(prog.ir, x)["O"], want, rtol=1e-5, atol=1e-5)


def test_docs_example_is_the_pass_output() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "pass_fold_init.md").read_text()
    shown = [part.split("```")[0] for part in text.split("```stripe\n")[1:3]]
    before = matmul()
    after = fold_init.run(before, OPTIONS, TARGET)
    assert shown == [print_ir(before.sub_blocks[0]), print_ir(after.sub_blocks[0])]


def assert_matmul_in_c(program: Block, seed: int) -> None:
    """``program`` (a matmul ``O = A @ B``) in C, over an output of 0xFF bytes (NaN), equals
    numpy on random inputs."""
    (m, k), (_, n) = (r.shape.sizes for r in program.refs if r.into in ("A", "B"))
    rng = np.random.default_rng(seed)
    x = {"A": rng.standard_normal((m, k)).astype(np.float32),
         "B": rng.standard_normal((k, n)).astype(np.float32)}
    prog = compile_program(program, [("passes", program)])
    prog.fill_byte = 0xFF
    np.testing.assert_allclose(prog(**x)["O"], x["A"] @ x["B"], rtol=1e-5, atol=1e-5)


def test_threads_after_fold_init_keeps_the_inner_view_fresh() -> None:
    """threads splits output indexes only: each thread's share is an instance of the inner
    block, which keeps the fresh view (the outer block only passes it down). The C code
    gets the output uninitialised (0xFF bytes: NaN) and must still compute every element."""
    folded = fold_init.run(matmul(64, 33, 40), OPTIONS, TARGET)
    after = run_and_check(threads.run, folded,
                          threads.Options(reqs=("kernel",), num_threads=2, min_work=1))
    assert fresh_views(after) == ["kernel_1_inner.O"]
    assert_matmul_in_c(after, seed=5)


def test_tiling_a_fresh_blocks_reduction_is_refused() -> None:
    folded = fold_init.run(matmul(6, 8, 4), OPTIONS, TARGET)
    main = folded.sub_blocks[0]
    with pytest.raises(ValueError, match="would split the reduction into fresh view 'O'"):
        apply_tile(main.sub_blocks[0], {"k": 4}, ancestors=(folded, main))
    assert autotile.run(folded, autotile.Options(reqs=("contraction",)), TARGET) is folded


@pytest.mark.parametrize("split", [False, True])
def test_cache_leaves_fresh_outputs_alone(split: bool) -> None:
    """A local copy of a fresh view (or of a view that is fresh further down) combined back
    into memory would add to what memory held, which no initialisation sets any more: cache
    leaves such views alone and caches the inputs."""
    program = fold_init.run(matmul(12, 7, 9), OPTIONS, TARGET)
    if split:  # the fresh view is then the inner block's, seen through the kernel's own
        program = threads.run(program, threads.Options(reqs=("kernel",), num_threads=2,
                                                       min_work=1), TARGET)
    after = run_and_check(cache.run, program,
                          cache.Options(reqs=("kernel",), mem_loc="L1", xfer_loc="CPU"))
    caches = sorted(r.into for _, b in after.walk() for r in b.refs
                    if r.is_alloc and r.into.endswith("_l1"))
    assert caches == ["A_l1", "B_l1"]
    assert_matmul_in_c(after, seed=7)



def test_verifier_admits_one_instance_per_private_buffer() -> None:
    """T is an allocation of the parent: each of its 3 points has its own, so the 3
    instances of the leaf store into different buffers."""
    sums = STALE[STALE.index("        1: block [s:WHOLE]"):STALE.rindex("    }\n}")]
    private = """        1: block [s:3]:3 ( // sums
            in A[2*s] fp32:I(2):(1):8 B
            out O[s] fp32:I(1):(1):4 B
            none new T[0] fp32:I(1):(1):4 B
        ) {
            0: block [j:2]:2 ( // leaf
                in A[j] fp32:I(1):(1):4 B
                out fresh T[0]:add fp32:I(1):(1):4 B
            ) {
                0: $a = load(A)
                1: T = store($a)
            }
            1: $t = load(T)
            2: O = store($t)
        }
"""
    program = parse_ir(STALE.replace(sums, private))
    verify(program)
    a = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(interpret(program, {"A": a})["O"], a[0::2] + a[1::2])
