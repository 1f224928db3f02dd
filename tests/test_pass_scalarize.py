"""scalarize: before/after Stripe text, negative cases, and interpreter equivalence."""

from __future__ import annotations

from passcheck import check_pass

from stripe.ir import Block
from stripe.passes import scalarize


def program(kernel: str, out_dtype: str = "fp32") -> str:
    """A ``#program`` reading ``A`` (4 x fp32) and writing ``O`` (4 x ``out_dtype``)."""
    return f"""#program block []:1 ( // prog
        #user in new A[0] fp32:I(4):(1)
        #user out new O[0] {out_dtype}:I(4):(1)
    ) {{
        0: #main block []:1 ( // main
            in A[0] fp32:I(4):(1)
            out O[0] {out_dtype}:I(4):(1)
        ) {{
            {kernel}
        }}
    }}"""


def run(text: str, **options: object) -> tuple[Block, Block]:
    return check_pass(scalarize.run, text, scalarize.Options(**options), tol=0)


def assert_rewrites(before: str, expected: str, **options: object) -> None:
    check_pass(scalarize.run, before, scalarize.Options(**options), expected=expected, tol=0)


def assert_unchanged(text: str, **options: object) -> None:
    check_pass(scalarize.run, text, scalarize.Options(**options), unchanged=True, tol=0)


def test_store_then_load_becomes_a_rename():
    before = program("""
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            #tmp none new T[0] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: $sq = mul:fp32($a, $a)
            2: T = store($sq)
            3: $t = load(T)
            4: $u = add:fp32($t, $a)
            5: O = store($u)
        }""")
    expected = program("""
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: $sq = mul:fp32($a, $a)
            4: $u = add:fp32($sq, $a)
            5: O = store($u)
        }""")
    assert_rewrites(before, expected)


def test_a_dtype_change_becomes_a_cast():
    # Storing into an i32 buffer truncates; the load must still see the truncated value.
    before = program("""
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            none new T[0, 0] i32:I(1, 1):(1, 1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: $big = mul:fp32($a, $a)
            2: T = store($big)
            3: $t = load(T)
            4: O = store($t)
        }""")
    expected = program("""
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: $big = mul:fp32($a, $a)
            3: $t = cast:i32($big)
            4: O = store($t)
        }""")
    assert_rewrites(before, expected)


def test_each_load_sees_the_latest_store():
    before = program("""
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            none new T[0] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: T = store($a)
            2: $x = load(T)
            3: $y = add:fp32($x, $x)
            4: T = store($y)
            5: $z = load(T)
            6: $w = add:fp32($x, $z)
            7: O = store($w)
        }""")
    expected = program("""
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            3: $y = add:fp32($a, $a)
            6: $w = add:fp32($a, $y)
            7: O = store($w)
        }""")
    assert_rewrites(before, expected)


def test_a_store_without_load_just_goes():
    before = program("""
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            none new T[0] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: T = store($a)
            2: O = store($a)
        }""")
    expected = program("""
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            2: O = store($a)
        }""")
    assert_rewrites(before, expected)


KERNEL = """
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            {decl}
            out O[i] fp32:I(1):(1)
        ) {{
            0: $a = load(A)
            1: T = store($a)
            2: $t = load(T)
            3: O = store($t)
        }}"""


def test_only_matching_allocations_and_blocks():
    text = program(KERNEL.format(decl="#tmp none new T[0] fp32:I(1):(1)"))
    assert_unchanged(text, ref_reqs=("other",))
    assert_unchanged(text, reqs=("main",))
    assert_unchanged(text, exclude=("kernel",))
    _, after = run(text, ref_reqs=("tmp",))
    assert not after.sub_blocks[0].sub_blocks[0].has_ref("T")


def test_left_alone_aggregation_and_size():
    assert_unchanged(program(KERNEL.format(decl="none new T[0]:add fp32:I(1):(1)")))
    assert_unchanged(program(KERNEL.format(decl="none new T[0] fp32:I(2):(1)")))


def test_left_alone_load_before_store():
    assert_unchanged(program("""
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            none new T[0] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $t = load(T)
            1: $a = load(A)
            2: T = store($a)
            3: $s = add:fp32($a, $t)
            4: O = store($s)
        }"""))


def test_left_alone_when_a_child_uses_it():
    assert_unchanged(program("""
        0: #kernel block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            none new T[0] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: T = store($a)
            2: block []:1 ( // child
                in T[0] fp32:I(1):(1)
                out O[0] fp32:I(1):(1)
            ) {
                0: $t = load(T)
                1: O = store($t)
            }
        }"""))


def test_root_buffers_visible_to_the_caller_are_never_touched():
    text = """#program block []:1 ( // prog
        #user in new A[0] fp32:I(1):(1)
        #user out new O[0] fp32:I(1):(1)
    ) {
        0: $a = load(A)
        1: O = store($a)
        2: $o = load(O)
        3: O = store($o)
    }"""
    assert_unchanged(text)
