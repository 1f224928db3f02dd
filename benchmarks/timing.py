"""Timing helpers shared by the suite (`run.py`) and the peer processes (`peer_worker.py`,
which runs in the peers' venv: standard library only)."""

from __future__ import annotations

import time
from collections.abc import Callable


def warm(fn: Callable[[], object], seconds: float) -> None:
    """Call ``fn`` untimed at least once and until ``seconds`` have passed: after a pause,
    on a shared VM, a multi-threaded program runs slower for several calls."""
    t_end = time.perf_counter() + seconds
    fn()
    while time.perf_counter() < t_end:
        fn()
