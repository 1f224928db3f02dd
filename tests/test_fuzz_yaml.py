"""Mutation fuzzing of hardware configs (``stripe.load_config`` on a YAML file).

Each example is a seed: ``fuzzing.yaml_input(seed)`` mutates a shipped or example config
(``hwconfigs/``), written under its own name to a temporary folder. The contract: the
config loads, its pipeline runs with the verifier on a small catalogue program and the
result (interpreted, sometimes compiled with the config's flags) equals the interpreter's on
the unoptimised program -- or a typed error, within the time limit.
``python tests/fuzzing.py show yaml SEED`` prints a seed's input.
"""

from __future__ import annotations

import random
from pathlib import Path

import fuzzing
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stripe

SEEDS = st.integers(0, 2**31 - 1)


@fuzzing.fuzz_settings(60, 1000)
@given(seed=SEEDS)
def test_yaml_mutants_load_or_fail_clearly(seed: int, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    workdir: Path = tmp_path_factory.mktemp("yaml", numbered=True)
    fuzzing.checked(fuzzing.check_yaml, seed, workdir, 0.1)


HEAD = "target: fuzz\nextends: cpu_generic\n"

# Inputs the fuzzers found or the issue names, kept as regressions: (name, file text).
KNOWN: list[tuple[str, str]] = [
    ("control_character", HEAD + "# a\x13b\n"),
    ("nul_byte", HEAD + "# a\x00b\n"),
    ("int_4400_digits", HEAD + "compute: {units: " + "9" * 4400 + "}\n"),
    ("int_2_64", HEAD + "compute: {units: 18446744073709551616}\n"),
    ("units_zero", HEAD + "compute: {units: 0}\n"),
    ("units_negative", HEAD + "compute: {units: -1}\n"),
    ("memory_size_2_63", "target: fuzz\nmemories:\n  - {name: L1, size: 9223372036854775808, "
                         "line: 64}\n"),
    ("flow_mapping_1000_deep", HEAD + "compute: " + "{a: " * 1000 + "1" + "}" * 1000 + "\n"),
    ("flow_sequence_1000_deep", HEAD + "cflags: " + "[" * 1000 + "]" * 1000 + "\n"),
    ("option_int_1e400", HEAD + "passes:\n  - {name: p, type: pad, options: {max_overhead: 1"
                         + "0" * 400 + "}}\n"),
    ("option_float_1e309", HEAD + "passes:\n  - {name: p, type: pad, options: {max_overhead: "
                           "1e309}}\n"),
    ("option_nan", HEAD + "passes:\n  - {name: p, type: pad, options: {max_overhead: .nan}}\n"),
    ("stencil_text_deep", HEAD + "passes:\n  - {name: s, type: stencil, options: {stencils: ["
                          + "[" * 500 + "]" * 500 + "]}}\n"),
    ("alias_bomb", HEAD + "a: &a [x, x, x, x, x, x, x, x, x]\n"
     + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, "
               f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(9))),
    ("extends_passwd", "target: fuzz\nextends: /etc/passwd\n"),
    ("extends_dev_zero", "target: fuzz\nextends: /dev/zero\n"),
    ("extends_proc", "target: fuzz\nextends: /proc/self/environ\n"),
    ("extends_self", "target: fuzz\nextends: config.yaml\n"),
    ("extends_folder", "target: fuzz\nextends: /\n"),
    ("pass_name_with_slash", HEAD + "passes:\n  - {name: a/b, type: cleanup}\n"),
    ("cflags_fast_math", HEAD + "cflags: [-O3, -ffast-math]\n"),
    ("cflags_march_other_cpu", HEAD + "cflags: [-O3, -march=bdver1]\n"),
    ("cflags_call_used", HEAD + "cflags: [-O3, -fcall-used-r12]\n"),
    ("cflags_trapv", HEAD + "cflags: [-O3, -ftrapv]\n"),
]


@pytest.mark.parametrize("text", [pytest.param(t, id=n) for n, t in KNOWN])
def test_known_config_inputs_load_or_fail_clearly(text: str, tmp_path: Path) -> None:
    result = fuzzing.checked(lambda seed: fuzzing.check_yaml_text(
        "config.yaml", text, tmp_path, random.Random(seed)), 0)
    assert result  # a typed error or a pipeline whose result equals the interpreter's


def test_extends_chain_of_976_files(tmp_path: Path) -> None:
    """A long ``extends:`` chain loads (each file one more level) or is refused clearly."""
    (tmp_path / "c0.yaml").write_text("target: c0\nextends: cpu_generic\n")
    for i in range(1, 976):
        (tmp_path / f"c{i}.yaml").write_text(f"target: c{i}\nextends: c{i - 1}.yaml\n")
    text = (tmp_path / "c975.yaml").read_text()
    fuzzing.checked(lambda seed: fuzzing.check_yaml_text("c975.yaml", text, tmp_path,
                                                         random.Random(seed)), 0)


def test_errors_do_not_echo_other_files(tmp_path: Path) -> None:
    """A config that names a file which is not a config does not quote that file."""
    secret = "root:x:0:0:" + "s3cr3t-" * 5
    other = tmp_path / "not_a_config.txt"
    other.write_text(secret + "\n" + secret + "\n")
    (tmp_path / "c.yaml").write_text(f"target: c\nextends: {other}\n")
    with pytest.raises(stripe.StripeError) as info:
        stripe.load_config(tmp_path / "c.yaml")
    assert "s3cr3t" not in str(info.value)
    with pytest.raises(stripe.StripeError) as info:
        stripe.load_config(other)
    assert "s3cr3t-s3cr3t" not in str(info.value)
