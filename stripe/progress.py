"""Progress of a compile: a callback protocol, and a bar for the command line.

    prog = stripe.compile(fn, progress=lambda stage, done, total: print(stage, done, total))

A compile is a sequence of steps: ``lower``, then ``pass <name>`` for every entry of the
pipeline, then ``emit C`` and, when the C is not in the build cache, ``compile C`` (the C
compiler). The callback is called as ``callback(stage, done, total)`` when a step starts
(``done`` steps of ``total`` are finished; ``stage`` names the one starting) and once more
as ``callback("done", total, total)`` at the end. A compile served from the caches reports
``done`` only. Callbacks run in the compiling thread; an exception they raise ends the
compile. Steps differ a lot in length: the C compiler of a whole network takes about as
long as all the passes together.

:class:`TerminalBar` is such a callback for a command line: it draws a bar on a stream
(stderr) only when the stream is a terminal and the compile has taken longer than
``delay`` seconds, with ``tqdm`` when it is installed and a plain text line otherwise.

Code that runs a step (the pass manager, the build) calls :func:`step`; it does nothing
outside :func:`tracking`, so the library pays nothing when nobody listens.
"""

from __future__ import annotations

import contextvars
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from .errors import ArgumentTypeError

Callback = Callable[[str, int, int], None]
"""``callback(stage, done, total)``: see the module docstring."""


class _Tracker:
    def __init__(self, callback: Callback, total: int) -> None:
        self.callback = callback
        self.total = total
        self.done = -1  # no step started yet

    def step(self, stage: str) -> None:
        self.done = min(self.done + 1, self.total)
        self.callback(stage, self.done, self.total)


_CURRENT: contextvars.ContextVar[_Tracker | None] = contextvars.ContextVar(
    "stripe_progress", default=None)


def check_callback(progress: object) -> Callback | None:
    """``progress`` when it is None or callable; else an ``ArgumentTypeError`` (a
    ``TypeError``) naming the argument."""
    if progress is not None and not callable(progress):
        raise ArgumentTypeError(f"progress must be None or a callable (stage, done, total), got "
                        f"{type(progress).__name__}")
    return progress  # type: ignore[return-value]


@contextmanager
def tracking(callback: Callback | None, total: int) -> Iterator[None]:
    """Report the steps started inside the body to ``callback`` (nothing when it is None),
    out of ``total``; ``callback("done", total, total)`` when the body ends normally."""
    if callback is None:
        yield
        return
    tracker = _Tracker(callback, total)
    token = _CURRENT.set(tracker)
    try:
        yield
    finally:
        _CURRENT.reset(token)
    callback("done", total, total)


def step(stage: str) -> None:
    """Start step ``stage`` of the current compile (nothing outside :func:`tracking`)."""
    tracker = _CURRENT.get()
    if tracker is not None:
        tracker.step(stage)


class PassSteps(list):  # type: ignore[type-arg]
    """A ``timings`` list for :func:`stripe.passes.manager.run_pipeline` that starts the
    step ``pass <name>`` of each entry of ``names`` (the pipeline's entries, in order):
    the first when it is made, each next one when the pipeline records the one before."""

    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names
        if names:
            step(f"pass {names[0]}")

    def append(self, item: Any) -> None:
        super().append(item)
        if len(self) < len(self.names):
            step(f"pass {self.names[len(self)]}")


class TerminalBar:
    """A progress callback that draws a bar on ``stream`` (default: stderr) once the compile
    has taken ``delay`` seconds, and only when the stream is a terminal; erased at the end.
    ``tqdm`` draws it when installed (``use_tqdm=None``: when importable)."""

    def __init__(self, stream: TextIO | None = None, delay: float = 2.0,
                 use_tqdm: bool | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.delay = delay
        self.start = time.monotonic()
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(isatty and isatty())
        self._tqdm: Any = None
        self._want_tqdm = use_tqdm
        self._shown = False
        # the line stays within the terminal (a wrapped line cannot be redrawn in place)
        self.columns = max(20, min(100, shutil.get_terminal_size((100, 24)).columns - 1))

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if stage == "done":
            self.close()
            return
        if not self._shown and time.monotonic() - self.start < self.delay:
            return
        self._shown = True
        if self._tqdm is None and self._want_tqdm is not False:
            self._tqdm = self._open_tqdm(total)
        if self._tqdm is not None:
            self._tqdm.set_description_str(stage[:40])
            self._tqdm.update(done - self._tqdm.n)
            return
        self.stream.write("\r" + self.line(stage, done, total))
        self.stream.flush()

    def _open_tqdm(self, total: int) -> Any:
        try:
            from tqdm import tqdm
        except ImportError:
            self._want_tqdm = False
            return None
        return tqdm(total=total, file=self.stream, leave=False, unit="step",
                    bar_format="compiling {desc} |{bar}| {n}/{total} [{elapsed}]")

    def line(self, stage: str, done: int, total: int, width: int = 30) -> str:
        """The plain bar: ``compiling |=====     | 12/29 pass tile_l2 (5 s)``."""
        filled = width * done // max(total, 1)
        elapsed = time.monotonic() - self.start
        text = (f"compiling |{'=' * filled}{' ' * (width - filled)}| {done}/{total} "
                f"{stage[:40]} ({elapsed:.0f} s)")
        return text.ljust(self.columns)[:self.columns]

    def close(self) -> None:
        """Erase the bar (if it was drawn)."""
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
        elif self._shown:
            self.stream.write("\r" + " " * self.columns + "\r")
            self.stream.flush()
        self._shown = False


__all__ = ["Callback", "PassSteps", "TerminalBar", "check_callback", "step", "tracking"]
