"""Fuzzing of the command line, ``stripe.cli.main(argv)`` in-process.

Each example is a seed: ``fuzzing.cli_input(seed)`` mutates a valid argument list (``show``,
``run --check``, ``run --interpret``, ``run --target ... --stats``, ``compile --dump-dir``,
``passes``, ``configs``): arguments replaced, deleted, duplicated or inserted, odd numbers,
paths and specs, mutated Tile files; run in a temporary working directory. The contract:
exit status 0, or 2 with one ``stripe: error:`` line (argparse's own exit included), never a
traceback or status 3 (an internal error), and never status 1 (``--check`` found a
difference from the interpreter). ``python tests/fuzzing.py show cli
SEED`` prints a seed's argument list.
"""

from __future__ import annotations

from pathlib import Path

import fuzzing
import pytest
from hypothesis import given
from hypothesis import strategies as st

SEEDS = st.integers(0, 2**31 - 1)


@fuzzing.fuzz_settings(100)
@given(seed=SEEDS)
def test_cli_mutants_exit_clearly(seed: int, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    workdir: Path = tmp_path_factory.mktemp("cli", numbered=True)
    fuzzing.checked(fuzzing.check_cli, seed, workdir)


EX = str(fuzzing.ROOT / "examples")
MM = [f"{EX}/matmul.tile", "-i", "A=5x7", "-i", "B=7x3"]

# Argument lists the fuzzers found or the issue names, kept as regressions.
KNOWN: list[tuple[str, list[str]]] = [
    ("nul_in_path", ["show", "\x00", "-i", "A=3"]),
    ("seed_negative", ["run", *MM, "--seed", "-1", "--repeat", "1"]),
    ("seed_2_64", ["run", *MM, "--seed", "18446744073709551616", "--repeat", "1"]),
    ("repeat_2_63", ["run", *MM, "--repeat", "9223372036854775808"]),
    ("repeat_zero", ["run", *MM, "--repeat", "0"]),
    ("repeat_negative", ["run", *MM, "--repeat", "-1"]),
    ("dump_dir_is_a_file", ["compile", *MM, "--dump-dir", "/etc/passwd"]),
    ("dump_dir_in_proc", ["compile", *MM, "--dump-dir", "/proc/self/x"]),
    ("folder_as_file", ["show", "/", "-i", "A=3"]),
    ("device_as_file", ["show", "/dev/zero", "-i", "A=3"]),
    ("input_2_64", ["run", f"{EX}/softmax.tile", "-i", "I=18446744073709551616x3",
                    "--interpret"]),
    ("input_10_10_elements", ["run", f"{EX}/softmax.tile", "-i", "I=100000x100000",
                              "--interpret"]),
    ("input_zero_size", ["run", f"{EX}/softmax.tile", "-i", "I=0x3", "--check", "--repeat",
                         "1"]),
    ("input_unknown_dtype", ["show", *MM[:3], "-i", "B=7x3:float99"]),
    ("target_passwd", ["run", *MM, "--target", "/etc/passwd", "--repeat", "1"]),
    ("target_missing", ["run", *MM, "--target", "nope", "--repeat", "1"]),
    ("target_avx512", ["run", *MM, "--target", "cpu_avx512", "--repeat", "1"]),
]


@pytest.mark.parametrize("argv", [pytest.param(a, id=n) for n, a in KNOWN])
def test_known_argument_lists_exit_clearly(argv: list[str], tmp_path: Path) -> None:
    # /dev/zero as a Tile file: reading it must end (in an error) before memory runs out
    with fuzzing.memory_limit(8 * 2**30):
        fuzzing.checked(lambda seed: fuzzing.check_cli_argv(argv, tmp_path), 0, limit=20.0)


def test_pass_named_with_a_slash_dumps_inside_the_folder(tmp_path: Path) -> None:
    """A config's pass names become dump file names: ``a/b`` stays inside the folder."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("target: c\nextends: cpu_generic\npasses:\n  - {name: a/b, type: cleanup}\n"
                   "  - {name: ../up, type: cleanup}\n")
    dump = tmp_path / "dump"
    result = fuzzing.checked(lambda seed: fuzzing.check_cli_argv(
        ["compile", *MM, "--target", str(cfg), "--dump-dir", str(dump)], tmp_path), 0)
    if result == "exit 0":
        written = {p.resolve() for p in tmp_path.rglob("*") if p.is_file()}
        assert all(dump.resolve() in p.parents or p == cfg.resolve() for p in written), written
