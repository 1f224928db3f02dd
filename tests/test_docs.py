"""Examples in docs/ that claim to be tool output are tool output."""

from pathlib import Path

import stripe

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _first_block_after(text: str, heading: str, lang: str) -> str:
    rest = text[text.index(heading):]
    start = rest.index(f"```{lang}\n") + len(lang) + 4
    return rest[start:rest.index("```", start)]


def test_ir_md_matmul_example_is_what_lower_prints():
    text = (DOCS / "ir.md").read_text()
    shown = _first_block_after(text, "### A matmul program", "stripe")
    src = "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }"
    program = stripe.lower(src, {"A": ((4, 3), "float32"), "B": ((3, 5), "float32")})
    assert stripe.print_ir(program) == shown


def test_accelerators_md_shows_the_real_pipeline_output():
    text = (DOCS / "accelerators.md").read_text()
    src = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
    prog = stripe.compile(src, {"A": ((64, 96), "float32"), "B": ((96, 80), "float32")},
                          target="npu_example")
    steps = dict(prog.trace)
    for name in ("lower", "tile_sram", "split_pes", "mac", "stage", "banks", "place"):
        heading = f"### After `{name}`" if name != "place" else "### After `schedule` and"
        shown = _first_block_after(text, heading, "stripe")
        kernel = next(b for _, b in steps[name].walk() if b.name == "kernel_1")
        assert stripe.print_ir(kernel) == shown, name
