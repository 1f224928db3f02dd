"""Shared fixtures: a seeded random generator and random arrays per dtype, and a temporary
cache directory for the whole test run.

The seed is derived from the test's node id, so every test sees the same values on every run
and adding a test never changes another test's inputs.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings
from ops_catalog import random_array as _random_array

RandomArray = Callable[..., np.ndarray]

# `pytest --hypothesis-profile=long` for deep property runs (tests scale their counts up).
settings.register_profile("long", max_examples=1000, deadline=None)


@pytest.fixture(scope="session", autouse=True)
def stripe_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Compiled modules and cached pipelines go to a directory of this test run
    (``STRIPE_CACHE_DIR``, which ``stripe.codegen.build.cache_dir`` reads at every call and
    subprocesses inherit), never to the user's ``~/.cache/stripe``. Tests about the cache
    itself set their own directory over it with ``monkeypatch.setenv``."""
    path = tmp_path_factory.mktemp("stripe-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STRIPE_CACHE_DIR", str(path))
        yield path


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def random_array(rng: np.random.Generator) -> RandomArray:
    """``random_array(shape, dtype, lo=None, hi=None)``: see ``ops_catalog.random_array``."""

    def make(shape: tuple[int, ...], dtype: str | np.dtype = "float32",
             lo: float | None = None, hi: float | None = None) -> np.ndarray:
        return _random_array(rng, tuple(shape), dtype, lo, hi)

    return make


def runnable_configs() -> list[object]:
    """Every shipped config as a pytest parameter; those whose instruction set this CPU
    lacks (``cpu_avx512`` on an AVX2-only machine) are skipped with the reason."""
    from stripe.codegen.build import missing_cpu_features
    from stripe.config import list_configs, load_config

    out: list[object] = []
    for name in list_configs():
        missing = missing_cpu_features(load_config(name).cflags)
        marks = [pytest.mark.skip(reason=f"this CPU lacks {', '.join(missing)}")] if missing else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out
