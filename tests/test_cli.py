"""The ``stripe`` command line: the README's main job, dumps, and errors without tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from stripe.cli import main, parse_input_spec
from stripe.dtypes import DType
from stripe.errors import StripeError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CONV = ["--input", "I=1x9x7x3:float32", "--input", "F=3x3x3x5:float32"]


def test_run_with_check_is_the_readme_main_job(capsys):
    assert main(["run", str(EXAMPLES / "conv2d.tile"), *CONV, "--check", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "O: 1x9x7x5 float32" in out
    assert "check against the interpreter: max error" in out and "(ok)" in out


def test_show_prints_the_lowered_ir(capsys):
    assert main(["show", str(EXAMPLES / "conv2d.tile"), *CONV]) == 0
    out = capsys.readouterr().out
    assert out.startswith("#program") and "#contraction" in out


def test_compile_writes_dumps(tmp_path, capsys):
    dump = tmp_path / "dump"
    assert main(["compile", str(EXAMPLES / "conv2d.tile"), *CONV, "--dump-dir", str(dump)]) == 0
    assert sorted(p.name for p in dump.iterdir()) == ["00_lower.stripe", "kernel.c"]
    assert (dump / "00_lower.stripe").read_text().startswith("#program")


def test_input_spec_parsing():
    assert parse_input_spec("A=37x23:float32") == ("A", ((37, 23), DType.FLOAT32))
    assert parse_input_spec("B=5:int8") == ("B", ((5,), DType.INT8))
    with pytest.raises(StripeError, match="expected NAME=SIZExSIZE"):
        parse_input_spec("A=3y4")
    with pytest.raises(StripeError, match="unknown dtype"):
        parse_input_spec("A=3:float16")


@pytest.mark.parametrize("argv, message", [
    (["run", "missing.tile", "--input", "A=3:float32"], "cannot read missing.tile"),
    (["run", str(EXAMPLES / "conv2d.tile"), "--input", "I=1x9x7:float32",
      "--input", "F=3x3x3x5:float32"], "I"),
    (["run", str(EXAMPLES / "conv2d.tile"), *CONV, "--target", "nowhere"],
     "valid configs: cpu_avx2"),
    (["run", str(EXAMPLES / "matmul.tile"), "--input", "A=100000000x100000000:float32",
      "--input", "B=100000000x3:float32"], "Unable to allocate"),  # MemoryError
])
def test_errors_are_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("stripe: error:") and message in err
    assert "Traceback" not in err


def test_syntax_error_points_at_the_column(tmp_path, capsys):
    bad = tmp_path / "bad.tile"
    bad.write_text("function (A[N]) -> (B) {\n    B[i : N] = +(A[i] * );\n}\n")
    assert main(["show", str(bad), "--input", "A=4:float32"]) == 2
    err = capsys.readouterr().err
    assert "line 2" in err and "^" in err


def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(StripeError):
        main(["show", "missing.tile", "--debug"])


def test_passes_and_configs_list_what_exists(capsys):
    assert main(["passes"]) == 0
    out = capsys.readouterr().out
    for name in ("cleanup", "localize", "scalarize"):
        assert f"{name}:" in out
    assert main(["configs"]) == 0
    out = capsys.readouterr().out
    assert "cpu_generic" in out and "cpu_avx2" in out


def test_run_with_a_target_dumps_every_pass(tmp_path, capsys):
    dump = tmp_path / "dump"
    assert main(["compile", str(EXAMPLES / "conv2d.tile"), *CONV, "--target", "cpu_avx2",
                 "--dump-dir", str(dump)]) == 0
    names = sorted(p.name for p in dump.iterdir())
    assert names[0] == "00_lower.stripe" and names[-1] == "kernel.c" and len(names) > 2
    assert main(["run", str(EXAMPLES / "conv2d.tile"), *CONV, "--target", "cpu_avx2",
                 "--check", "--repeat", "1"]) == 0
    assert "(ok)" in capsys.readouterr().out


@pytest.mark.parametrize("target", ["cpu_avx2", "npu_example"])
def test_compile_dumps_the_c_that_the_library_builds(target, tmp_path, capsys):
    """`stripe compile --target T` writes the C that `stripe.compile(..., target=T)` runs:
    the same flags and the config's SIMD settings (vector width, kernel unrolling, prefetch
    distances, FMA chains), not the default settings."""
    import numpy as np

    import stripe

    dump = tmp_path / "dump"
    src = EXAMPLES / "conv2d.tile"
    assert main(["compile", str(src), "--input", "I=1x17x19x8:float32",
                 "--input", "F=3x3x8x16:float32", "--target", target,
                 "--dump-dir", str(dump)]) == 0
    prog = stripe.compile(src.read_text(), {"I": np.zeros((1, 17, 19, 8), np.float32),
                                            "F": np.zeros((3, 3, 8, 16), np.float32)},
                          target=target)
    assert (dump / "kernel.c").read_text() == prog.c_source


def test_stats_table_formatting():
    from stripe.cli import format_stats

    table = format_stats({"SRAM": {"bytes_in": 48, "transfers": 3}, "main": {"bytes_out": 48}})
    lines = table.splitlines()
    assert lines[0].split() == ["unit", "bytes_in", "bytes_out", "transfers"]
    assert lines[1].split() == ["SRAM", "48", "3"] and lines[2].split() == ["main", "48"]
    assert "no transfers" in format_stats({})
