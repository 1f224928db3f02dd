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
    assert main(["compile", str(EXAMPLES / "conv2d.tile"), *CONV, "--dump-dir", str(dump),
                 "--target", "none"]) == 0
    assert sorted(p.name for p in dump.iterdir()) == ["00_lower.stripe", "kernel.c"]
    assert (dump / "00_lower.stripe").read_text().startswith("#program")
    host = tmp_path / "host"  # the default target: one dump per pass of the host config
    assert main(["compile", str(EXAMPLES / "conv2d.tile"), *CONV, "--dump-dir", str(host)]) == 0
    names = sorted(p.name for p in host.iterdir())
    assert names[0] == "00_lower.stripe" and names[-1] == "kernel.c" and len(names) > 10


def test_input_spec_parsing():
    assert parse_input_spec("A=37x23:float32") == ("A", ((37, 23), DType.FLOAT32))
    assert parse_input_spec("B=5:int8") == ("B", ((5,), DType.INT8))
    with pytest.raises(StripeError, match="expected NAME=SIZExSIZE"):
        parse_input_spec("A=3y4")
    with pytest.raises(StripeError, match="unknown dtype"):
        parse_input_spec("A=3:complex64")


@pytest.mark.parametrize("argv, message", [
    (["run", "missing.tile", "--input", "A=3:float32"], "cannot read 'missing.tile'"),
    (["run", str(EXAMPLES / "conv2d.tile"), "--input", "I=1x9x7:float32",
      "--input", "F=3x3x3x5:float32"], "I"),
    (["run", str(EXAMPLES / "conv2d.tile"), *CONV, "--target", "nowhere"],
     "valid configs: cpu_avx2"),
    (["run", str(EXAMPLES / "matmul.tile"), "--input", "A=100000000x100000000:float32",
      "--input", "B=100000000x3:float32"], "STRIPE_MAX_BYTES"),  # the memory limit
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


MATMUL = [str(EXAMPLES / "matmul.tile"), "-i", "A=5x7", "-i", "B=7x3"]


@pytest.mark.parametrize("argv, message", [
    (["run", *MATMUL, "--seed", "-1"], "argument --seed: expected an integer from 0"),
    (["run", *MATMUL, "--seed", "1.5"], "argument --seed: expected an integer from 0"),
    (["run", *MATMUL, "--seed", "9" * 5000], "argument --seed: expected an integer from 0"),
    (["run", *MATMUL, "--repeat", "0"], "argument --repeat: expected an integer from 1 to"),
    (["run", *MATMUL, "--repeat", "-3"], "argument --repeat: expected an integer from 1 to"),
    (["run", *MATMUL, "--repeat", "9223372036854775808"], "argument --repeat"),
    (["run", *MATMUL, "--repeat", "1e3"], "argument --repeat"),
])
def test_bad_numbers_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def _fails(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("stripe: error:") and "Traceback" not in err
    return err


@pytest.mark.parametrize("spec, message", [
    ("A=99999999999999999999x7", "a size does not fit in 64 bits"),
    ("A=" + "9" * 5000, "a size does not fit in 64 bits"),
    ("A=5x7:float99", "bad --input 'A=5x7:float99': unknown dtype 'float99'"),
    ("A=5x7:complex64", "unknown dtype"),
    ("A=-5x7", "expected NAME=SIZExSIZE"),
    ("A=5x", "expected NAME=SIZExSIZE"),
    ("A", "expected NAME=SIZExSIZE"),
    ("=5x7", "expected NAME=SIZExSIZE"),
    ("A=5x7:", "expected NAME=SIZExSIZE"),
    ("A=5x7\n", "expected NAME=SIZExSIZE"),
    ("A=\u0665x7", "expected NAME=SIZExSIZE"),  # an Arabic-Indic digit
    ("A=100000x100000", "STRIPE_MAX_BYTES"),
])
def test_bad_input_specs(spec, message, capsys):
    err = _fails(["run", str(EXAMPLES / "matmul.tile"), "-i", spec, "-i", "B=7x3"], capsys)
    assert message in err


def test_an_input_given_twice(capsys):
    assert "--input A is given twice" in _fails(["show", *MATMUL, "-i", "A=5x7"], capsys)


def test_inputs_that_are_not_tile_files(tmp_path, capsys):
    import os

    (tmp_path / "bad.tile").write_bytes(b"function (A) -> (B) { B = A; } \xff\xfe")
    os.mkfifo(tmp_path / "fifo")  # opening it would block: it is refused first
    cases = [(tmp_path, "not a regular file"), ("/dev/zero", "not a regular file"),
             (tmp_path / "fifo", "not a regular file"),
             (tmp_path / "bad.tile", "not UTF-8 text (byte 0xff at offset 31)"),
             (tmp_path / "missing.tile", "No such file or directory"),
             ("a\x00b", "cannot read"), (tmp_path / "bad.tile" / "x", "Not a directory")]
    for path, message in cases:
        assert message in _fails(["show", str(path), "-i", "A=3"], capsys)


def test_dump_dir_that_cannot_be_written(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("keep")
    for where, message in ((afile, "File exists"), (afile / "sub", "Not a directory"),
                           ("a\x00b", "cannot write the dumps")):
        err = _fails(["compile", *MATMUL, "--dump-dir", str(where)], capsys)
        assert "cannot write the dumps to --dump-dir" in err and message in err
    assert afile.read_text() == "keep"


def test_pass_names_become_safe_file_names(tmp_path, capsys):
    """Dump files are named from pass names: every character but letters, digits, _, - and .
    becomes _, so a pass named a/b or ../x writes into the dump directory and nowhere else."""
    config = tmp_path / "odd.yaml"
    config.write_text("target: odd\nextends: cpu_generic\npasses:\n"
                      "  - {name: a/b, type: cleanup}\n"
                      "  - {name: \"../../x \\u00e9\", type: cleanup}\n")
    dump = tmp_path / "dump"
    assert main(["compile", *MATMUL, "--target", str(config), "--dump-dir", str(dump)]) == 0
    names = sorted(p.name for p in dump.iterdir())
    assert "05_a_b.stripe" in names and "06_.._.._x__.stripe" in names
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump", "odd.yaml"]


def test_dump_name():
    from stripe.cli import dump_name

    assert dump_name("cleanup") == "cleanup" and dump_name("a/b") == "a_b"
    assert dump_name("") == "_" and dump_name("\x00" * 100) == "_" * 64


@pytest.mark.parametrize("dtype", list(DType))
def test_random_inputs_are_made_in_their_dtype(dtype):
    """Random inputs come out in their dtype, on a cache line, seeded, without a temporary
    wider than the chunk of integers (an int8 input of 4 MiB is not made as 32 MiB of int64)."""
    import tracemalloc

    import numpy as np

    from stripe.arrays import is_aligned
    from stripe.cli import random_array

    shape = (4, 1 << 20)
    random_array(np.random.default_rng(5), (3,), dtype)  # one-time costs (lazy imports)
    tracemalloc.start()
    try:
        a = random_array(np.random.default_rng(5), shape, dtype)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert a.dtype == dtype.np and a.shape == shape and is_aligned(a)
    assert peak < a.nbytes + (1 << 20) * dtype.itemsize + 4096
    b = random_array(np.random.default_rng(5), shape, dtype)
    assert np.array_equal(a, b)
    if dtype.is_float:
        assert 0.9 < float(a.astype(np.float64).std()) < 1.1
    else:
        lo, hi = (0, 1) if dtype is DType.BOOL else (0, 9) if dtype.is_unsigned else (-10, 9)
        assert a.min() == lo and a.max() == hi


def test_help_lists_the_exit_statuses(capsys):
    for argv in (["--help"], ["run", "--help"], ["compile", "--help"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0
        out = capsys.readouterr().out
        assert "exit statuses:" in out and "internal error" in out


def test_an_internal_error_is_one_line_and_exit_3(monkeypatch, capsys):
    import stripe.cli as cli

    def broken(args):  # type: ignore[no-untyped-def]
        raise KeyError("a\nb")

    monkeypatch.setattr(cli, "_cmd_show", broken)
    assert main(["show", *MATMUL]) == 3
    err = capsys.readouterr().err
    assert err.startswith("stripe: internal error: KeyError:") and err.count("\n") == 1
    with pytest.raises(KeyError):
        main(["show", *MATMUL, "--debug"])


def test_an_interrupt_is_exit_130(monkeypatch, capsys):
    import stripe.cli as cli

    def interrupted(args):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_cmd_show", interrupted)
    assert main(["show", *MATMUL]) == 130
    assert capsys.readouterr().err == "stripe: interrupted\n"


def test_a_closed_stdout_is_an_error_not_a_traceback(monkeypatch, capsys):
    import stripe.cli as cli

    def closed(args):  # type: ignore[no-untyped-def]
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "_cmd_show", closed)
    assert main(["show", *MATMUL]) == 2
    assert "standard output was closed" in capsys.readouterr().err


@pytest.mark.parametrize("body", ["O = log(A);", "O = A / 0.0;", "O = sqrt(A) * 0.0;"])
def test_check_counts_the_same_nan_and_infinity_as_equal(body, tmp_path, capsys):
    """Random normal inputs make NaN and infinities here, in the C and in the interpreter
    alike: --check reports ok (it reported a mismatch), and nothing goes to stderr."""
    tile = tmp_path / "nan.tile"
    tile.write_text(f"function (A[N]) -> (O) {{ {body} }}\n")
    assert main(["run", str(tile), "-i", "A=64", "--check", "--repeat", "1"]) == 0
    captured = capsys.readouterr()
    assert "(ok)" in captured.out and captured.err == ""


def test_check_error_measure():
    import numpy as np

    from stripe.cli import _error

    f32 = np.float32
    assert _error(np.array([np.nan, np.inf, 1], f32), np.array([np.nan, np.inf, 1], f32))[0] == 0
    for got in ([np.nan, 1], [np.inf, 1], [-np.inf, 1]):
        assert _error(np.array(got, f32), np.array([1, 1], f32))[0] == np.inf
    assert _error(np.array([-np.inf], f32), np.array([np.inf], f32))[0] == np.inf
    err, tol = _error(np.array([1.0001, 1], f32), np.array([1, 1], f32))
    assert 0 < err <= tol
    big = np.array([-2**63], np.int64), np.array([2**63 - 1], np.int64)
    assert _error(*big) == (float(2**64 - 1), 0.0)  # no wrapping
    assert _error(np.array([True]), np.array([False])) == (1.0, 0.0)
