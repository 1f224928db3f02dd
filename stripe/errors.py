"""Typed errors. Every error a user can provoke is a :class:`StripeError`.

Each subclass carries *where* the problem is: line and column for Tile source, the block path
for IR problems, file and line for configuration files.
"""

from __future__ import annotations


class StripeError(Exception):
    """Base class of every error raised on bad input."""


class TileSyntaxError(StripeError):
    """A Tile program does not parse. Carries ``line`` and ``column`` (both 1-based)."""

    def __init__(self, message: str, line: int, column: int, source_line: str = "") -> None:
        self.line = line
        self.column = column
        self.source_line = source_line
        self.bare_message = message
        text = f"line {line}, column {column}: {message}"
        if source_line:
            text += f"\n    {source_line}\n    {' ' * max(column - 1, 0)}^"
        super().__init__(text)


class TileError(StripeError):
    """A Tile program parses but is not meaningful (shapes, types, names)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        self.line = line
        self.column = column
        self.bare_message = message
        where = f"line {line}, column {column}: " if line is not None else ""
        super().__init__(where + message)


class ShapeError(TileError):
    """Ranks, sizes or dimension bindings do not agree."""


class TypeError_(TileError):
    """Element types do not agree (named with a trailing underscore to keep the builtin)."""


class IRError(StripeError):
    """Malformed IR. Carries the block path (``main/kernel_2``) where it was found."""

    def __init__(self, message: str, path: str = "") -> None:
        self.path = path
        self.bare_message = message
        super().__init__(f"{path}: {message}" if path else message)


class VerifyError(IRError):
    """The verifier rejected a program."""


class IRParseError(StripeError):
    """Stripe text does not parse. Carries ``line`` and ``column``."""

    def __init__(self, message: str, line: int, column: int) -> None:
        self.line = line
        self.column = column
        super().__init__(f"line {line}, column {column}: {message}")


class InterpreterError(IRError):
    """The reference interpreter met something it cannot execute (bad bindings, bad IR)."""


class LimitError(StripeError):
    """A documented limit was exceeded: a program's memory, an integer's width, an
    expression's depth, a compile's time (docs/limits.md)."""


class ArgumentError(StripeError, ValueError):
    """An argument of a public function has a wrong value (a shape, dtype, size, name or
    layout); the message names the argument. Also a ``ValueError``."""


class ArgumentTypeError(StripeError, TypeError):
    """An argument of a public function has a wrong type; the message names the argument.
    Also a ``TypeError``."""


class CompileError(StripeError):
    """A program could not be compiled for its target: the C compiler failed (``c_path`` is
    the kept source, ``log`` the compiler's output), or a target without host fallback
    cannot run a kernel (:class:`stripe.mapping.MappingError`)."""

    def __init__(self, message: str, c_path: str = "", log: str = "") -> None:
        self.c_path = c_path
        self.log = log
        text = message
        if c_path:
            text += f"\n  source kept at {c_path}"
        if log:
            text += f"\n{log}"
        super().__init__(text)
