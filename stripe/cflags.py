"""The C compiler flags a hardware config may give (``cflags:``).

Config files are user input and their flags reach the compiler's command line.

    cflag_problem("-O2")        # None: allowed
    cflag_problem("-fdump-x")   # "is not allowed": why it is refused
    VALID_CFLAGS                # the forms that are allowed, for error messages
"""

from __future__ import annotations

import re

# cflags --------------------------------------------------------------------------------------

# (what the message shows, the pattern). Config files are user input and their flags reach the
# compiler's command line, so only plain optimisation and target flags pass.
_CFLAG_ALLOWED = (
    ("-O0 -O1 -O2 -O3 -Os -Ofast", r"-O[0-3s]|-Ofast"),
    ("-g -g0..-g3", r"-g[0-3]?"),
    ("-march=NAME", r"-march=[a-z0-9][a-z0-9_.-]*"),
    ("-mtune=NAME", r"-mtune=[a-z0-9][a-z0-9_.-]*"),
    ("-mprefer-vector-width=128|256|512", r"-mprefer-vector-width=(128|256|512)"),
    ("-m[no-]FEATURE", r"-m(no-)?[a-z0-9][a-z0-9.-]*"),
    ("-f[no-]OPTION except file-writing and plugin options", r"-f(no-)?[a-z0-9][a-z0-9-]*"),
)
# Flags that match the patterns but write files, load code, or take the next argument.
_CFLAG_DENIED = re.compile(
    r"-f(no-)?(dump|profile|auto-profile|plugin|syntax-only|stack-usage|callgraph-info"
    r"|save-optimization-record|opt-info|record|debug|working-directory|lto|coverage"
    r"|test-coverage|branch-probabilities|openmp|openacc)"
    r"|-mllvm")
_CFLAG_RE = re.compile("|".join(f"(?:{p})" for _, p in _CFLAG_ALLOWED))


def cflag_ok(flag: str) -> bool:
    """True when ``flag`` may reach the C compiler's command line."""
    return (len(flag) <= 64 and _CFLAG_RE.fullmatch(flag) is not None
            and _CFLAG_DENIED.match(flag) is None)


VALID_CFLAGS = tuple(d for d, _ in _CFLAG_ALLOWED)


def cflag_problem(flag: str) -> str | None:
    """Why ``flag`` may not reach the C compiler (a phrase that follows the flag in a
    message), or None when it may."""
    return None if cflag_ok(flag) else "is not allowed"


__all__ = ["VALID_CFLAGS", "cflag_ok", "cflag_problem"]
