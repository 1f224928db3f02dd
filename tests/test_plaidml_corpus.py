"""The Tile that PlaidML 0.7 composes runs here with PlaidML's results.

``tests/golden/plaidml`` holds programs harvested from PlaidML 0.7's op library, its Keras
backend and the operators of ``plaidml.tile.Value`` (``tests/plaidml/harvest.py``, run by
hand where PlaidML is installed; see docs/plaidml_corpus.md): each entry's Tile source, its
inputs (including PlaidML's scalar constants, as rank-0 arrays) and PlaidML's outputs.

Every entry is lowered and interpreted, and compiled and run; both must give PlaidML's
outputs with PlaidML's dtypes (bit for bit for integers and booleans, to a tolerance by
dtype for floats). Every entry is interpreted in every run; the compiled check runs every
entry on ``cpu_generic``, the host's CPU config (``cpu_avx2``, or ``cpu_avx512`` where the
CPU has it) and ``npu_example`` with ``--hypothesis-profile=long``, and a fixed sample of
about one entry in twelve, each on one of the three configs, by default (each compiled entry
costs a C compiler run).

Entries that fail today are listed in ``XFAIL`` (interpreter and compiled alike) and
``XFAIL_COMPILED`` (only a compiled config) with the reason; they are strict, so an entry
that starts to pass must leave the list.
"""

from __future__ import annotations

import json
import zlib
from functools import cache
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import settings

import stripe
from stripe import host
from stripe.cflags import cpu_flags

CORPUS = Path(__file__).parent / "golden" / "plaidml"


CONFIGS = tuple(dict.fromkeys(  # the host's CPU config (cpu_generic on CPUs without AVX2)
    ("cpu_generic", host.choose_config(cpu_flags(), this_cpu=True), "npu_example")))
SAMPLE = 12

# entry -> why it fails today, with the owning area ([frontend], [dtypes], [builtins]).
XFAIL: dict[str, str] = {}

# (entry, config) -> why that compiled config fails while the interpreter passes.
XFAIL_COMPILED: dict[tuple[str, str], str] = {}


@cache
def _index() -> dict[str, Any]:
    return json.loads((CORPUS / "index.json").read_text())


@cache
def _arrays() -> dict[str, np.ndarray]:
    with np.load(CORPUS / "arrays.npz") as z:
        return {k: z[k] for k in z.files}


ENTRIES = {e["name"]: e for e in _index()["entries"]}


def _array(key: str, spec: dict[str, Any]) -> np.ndarray:
    """The stored array; bfloat16 is stored as its uint16 bits."""
    arr = _arrays()[key]
    return arr.view(ml_dtypes.bfloat16) if spec["dtype"] == "bfloat16" else arr


def _inputs(name: str) -> dict[str, np.ndarray]:
    return {k: _array(f"{name}/in/{k}", v) for k, v in ENTRIES[name]["inputs"].items()}


def _expected(name: str) -> dict[str, np.ndarray]:
    return {k: _array(f"{name}/out/{k}", v) for k, v in ENTRIES[name]["outputs"].items()}


def _tolerance(dtype: np.dtype) -> tuple[float, float] | None:
    """(rtol, atol) for a float dtype, None for bit-exact dtypes."""
    if dtype.kind != "f" and dtype.name != "bfloat16":
        return None
    if dtype.itemsize == 2:
        return 4e-3, 4e-3
    return 1e-4, 1e-5


def _compare(name: str, got: dict[str, np.ndarray]) -> None:
    for out, want in _expected(name).items():
        assert out in got, f"{name}: no output {out} (got {sorted(got)})"
        have = np.asarray(got[out])
        assert have.dtype == want.dtype, f"{name}: {out} is {have.dtype}, not {want.dtype}"
        assert have.shape == want.shape, f"{name}: {out} shape {have.shape}, not {want.shape}"
        tol = _tolerance(want.dtype)
        if tol is None:
            np.testing.assert_array_equal(have, want, err_msg=f"{name}: {out}")
        else:
            np.testing.assert_allclose(have.astype(np.float64), want.astype(np.float64),
                                       rtol=tol[0], atol=tol[1], equal_nan=True,
                                       err_msg=f"{name}: {out}")


def _xfail(reason: str | None) -> list[pytest.MarkDecorator]:
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


def _interp_params() -> list[Any]:
    return [pytest.param(n, marks=_xfail(XFAIL.get(n)), id=n) for n in sorted(ENTRIES)]


def _compiled_params() -> list[Any]:
    """Every entry on every config in the long profile. By default one entry in ``SAMPLE``
    (by a hash of its name), the sampled entries dealt to the configs in turn: building the
    C of each costs a C compiler run, too many for the default run's time budget."""
    everything = settings._current_profile == "long"
    out = []
    sampled = [n for n in sorted(ENTRIES) if zlib.crc32(n.encode()) % SAMPLE == 0]
    for n in sorted(ENTRIES):
        if everything:
            configs: tuple[str, ...] = CONFIGS
        elif n in sampled:
            configs = (CONFIGS[sampled.index(n) % len(CONFIGS)],)
        else:
            continue
        for cfg in configs:
            reason = XFAIL.get(n) or XFAIL_COMPILED.get((n, cfg))
            out.append(pytest.param(n, cfg, marks=_xfail(reason), id=f"{n}-{cfg}"))
    return out


def test_corpus_is_consistent() -> None:
    """Every listed array exists, the xfail lists name real entries and configs, and the
    corpus stays small."""
    for name, e in ENTRIES.items():
        for where, specs in (("in", e["inputs"]), ("out", e["outputs"])):
            for k, spec in specs.items():
                a = _array(f"{name}/{where}/{k}", spec)
                assert list(a.shape) == spec["shape"] and str(a.dtype) == spec["dtype"], (
                    name, where, k)
    assert set(XFAIL) <= set(ENTRIES), sorted(set(XFAIL) - set(ENTRIES))
    for n, cfg in XFAIL_COMPILED:
        assert n in ENTRIES and cfg in CONFIGS and n not in XFAIL, (n, cfg)
    size = sum(p.stat().st_size for p in CORPUS.iterdir())
    assert size < 3_000_000, size


@pytest.mark.parametrize("name", _interp_params())
def test_interpreter_matches_plaidml(name: str) -> None:
    e = ENTRIES[name]
    inputs = _inputs(name)
    block = stripe.lower(e["source"], inputs)
    _compare(name, stripe.interpret(block, inputs))


@pytest.mark.parametrize("name, config", _compiled_params())
def test_compiled_matches_plaidml(name: str, config: str) -> None:
    e = ENTRIES[name]
    inputs = _inputs(name)
    prog = stripe.compile(e["source"], inputs, target=config)
    _compare(name, prog(**inputs))
