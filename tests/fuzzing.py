"""Seeded mutation fuzzing: mutators for text inputs and values, and the outcome classifier.

Every mutator is a pure function of its input and a ``random.Random``: the same seed gives
the same mutant, so a failing input is reproduced from ``(entry point, seed)`` alone.

    rng = random.Random(seed)
    text = mutate_text(source, rng, TILE)        # one to three mutations of Tile source
    kind, key = classify(exc)                    # "typed" or "internal", with a grouping key

The hypothesis tests (``tests/test_fuzz_*.py``) draw seeds and run ``check_<entry>(seed)``;
the campaign (``python tests/fuzzing.py campaign --count 2000``) runs thousands of seeds per
entry point in a watched subprocess (a crash or a hang inside C ends only that input) and
groups the internal errors by root cause; ``python tests/fuzzing.py show ENTRY SEED`` prints
one seed's input.

Outcome contract checked everywhere: an input gives a result (compared with the reference
interpreter where one exists), or a typed error -- a ``StripeError`` subclass, or a
``TypeError``/``ValueError`` raised by stripe's own code -- within a time limit. Anything
else (another exception type, a ``TypeError`` from inside numpy, a crash, a hang) is a bug.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Numbers that reach the edges: zero, negatives, the 32/63/64-bit boundaries, past float64,
# Python's 4300-digit limit, and non-finite floats.
SPECIAL_NUMBERS: tuple[str, ...] = (
    "0", "-1", "1", "2", "3", "7", "2147483647", "2147483648", "4294967296",
    "9223372036854775807", "9223372036854775808", "18446744073709551616",
    "4611686018427387904", "-9223372036854775809", "1" + "0" * 400, "9" * 4400,
    "0.5", "-0.0", "1e309", "1e-320", "3.4e38", "nan", "inf", "-inf", "1e18", "0x10",
    "1_000", "00", "+5",
)

# Odd text fragments: control characters, NUL, unicode identifiers, lookalikes, RTL marks.
ODD_FRAGMENTS: tuple[str, ...] = (
    "\x00", "\x7f", "\r", "\t", "\u00e9", "\u0391", "\u200b", "\u202e", "\ufeff", "\U0001f600",
    "\ud7ff", "\\", "'", '"', "#", "//", "/*", "{{", "}}", "$", "@", "`", "\n\n",
)

IDENTIFIERS: tuple[str, ...] = (
    "_", "x", "A", "O", "I", "B", "C", "main", "program", "float32", "int64", "bool",
    "function", "tanh", "max", "min", "select", "cond", "index", "idx", "a" * 300,
    "\u00e9t\u00e9", "None", "true", "null", "__class__", "stripe_run",
)


@dataclass(frozen=True)
class Language:
    """How to wrap a piece of text of one input language: repeated and nested forms."""

    name: str
    repeat: tuple[str, ...]   # "{x}" is the repeated piece, "{sep}"-joined
    nest: tuple[tuple[str, str], ...]  # (open, close) pairs for deep nesting


TILE = Language("tile", (" + ", " * ", ", "), (("(", ")"), ("-", ""), ("tanh(", ")"),
                                               ("max(", ", 0)"), ("!", ""),
                                               ("cond ? ", " : 0"), ("[", "]")))
IR = Language("ir", (" ", ", ", "\n", " + "), (("{", "}"), ("(", ")"), ("[", "]"),
                                              ("-", ""), ("block []:\n", "")))
YAML = Language("yaml", ("\n  - ", ", ", "\n"), (("[", "]"), ("{a: ", "}"), ("- ", ""),
                                                  ("&a ", ""), ("!!str ", "")))
TEXT = Language("text", (" ", ","), (("(", ")"),))

_TOKEN = re.compile(
    r"\d+\.\d*(?:[eE][+-]?\d+)?|\d+(?:[eE][+-]?\d+)?|[A-Za-z_$#][A-Za-z0-9_$#]*|\s+|.",
    re.S)


def tokens(text: str) -> list[str]:
    """``text`` cut into numbers, identifiers, runs of white space and single characters;
    ``"".join(tokens(t)) == t``."""
    return _TOKEN.findall(text)


def _spots(toks: list[str], pred: Callable[[str], bool]) -> list[int]:
    return [i for i, t in enumerate(toks) if pred(t)]


def _is_number(t: str) -> bool:
    return t[:1].isdigit()


def _is_ident(t: str) -> bool:
    return t[:1].isalpha() or t[:1] == "_"


def _is_solid(t: str) -> bool:
    return not t.isspace()


# --- the mutations: (text, rng, language) -> text -----------------------------------------

def byte_flip(text: str, rng: random.Random, lang: Language) -> str:
    """Flip one bit of one byte of the UTF-8 encoding (invalid UTF-8 replaced)."""
    data = bytearray(text.encode())
    if not data:
        return text
    i = rng.randrange(len(data))
    data[i] ^= 1 << rng.randrange(8)
    return data.decode("utf-8", errors="replace")


def delete_token(text: str, rng: random.Random, lang: Language) -> str:
    toks = tokens(text)
    spots = _spots(toks, _is_solid)
    if spots:
        i = rng.choice(spots)
        n = rng.choice((1, 1, 1, 2, 5))
        del toks[i:i + n]
    return "".join(toks)


def duplicate_token(text: str, rng: random.Random, lang: Language) -> str:
    toks = tokens(text)
    spots = _spots(toks, _is_solid)
    if spots:
        i = rng.choice(spots)
        n = rng.choice((1, 1, 3))
        toks[i:i] = toks[i:i + n]
    return "".join(toks)


def swap_tokens(text: str, rng: random.Random, lang: Language) -> str:
    toks = tokens(text)
    spots = _spots(toks, _is_solid)
    if len(spots) >= 2:
        i, j = rng.sample(spots, 2)
        toks[i], toks[j] = toks[j], toks[i]
    return "".join(toks)


def replace_number(text: str, rng: random.Random, lang: Language) -> str:
    toks = tokens(text)
    spots = _spots(toks, _is_number)
    if not spots:
        return insert_number(text, rng, lang)
    toks[rng.choice(spots)] = rng.choice(SPECIAL_NUMBERS)
    return "".join(toks)


def insert_number(text: str, rng: random.Random, lang: Language) -> str:
    toks = tokens(text)
    i = rng.randrange(len(toks) + 1)
    toks.insert(i, rng.choice(SPECIAL_NUMBERS))
    return "".join(toks)


def nudge_number(text: str, rng: random.Random, lang: Language) -> str:
    """A number changed a little (n-1, n+1, 2n, 0, 1): a program that still parses and
    often still verifies, with other sizes, offsets or strides."""
    toks = tokens(text)
    spots = _spots(toks, lambda t: t.isascii() and t.isdigit())
    if not spots:
        return text
    i = rng.choice(spots)
    n = int(toks[i]) if len(toks[i]) < 30 else 1
    toks[i] = str(max(0, rng.choice((n - 1, n + 1, 2 * n, 0, 1, n + 7))))
    return "".join(toks)


OPERATORS: tuple[str, ...] = ("+", "-", "*", "/", "%", ">", "<", "=", "!", "?", ":", ",", ";",
                              "&", "|", "^", "==", "<=", ">=", "&&", "||", "<<", ">>")


def replace_operator(text: str, rng: random.Random, lang: Language) -> str:
    """An operator or punctuation character replaced by another."""
    toks = tokens(text)
    spots = _spots(toks, lambda t: t in OPERATORS)
    if spots:
        toks[rng.choice(spots)] = rng.choice(OPERATORS)
    return "".join(toks)


def replace_identifier(text: str, rng: random.Random, lang: Language) -> str:
    toks = tokens(text)
    spots = _spots(toks, _is_ident)
    if spots:
        i = rng.choice(spots)
        others = [toks[j] for j in spots]
        toks[i] = rng.choice(others) if rng.random() < 0.5 else rng.choice(IDENTIFIERS)
    return "".join(toks)


def insert_odd(text: str, rng: random.Random, lang: Language) -> str:
    """NUL bytes, control characters, unicode, quotes at a random place."""
    i = rng.randrange(len(text) + 1)
    frag = rng.choice(ODD_FRAGMENTS)
    if rng.random() < 0.3:
        frag = "".join(chr(rng.choice((rng.randrange(1, 0x80), rng.randrange(0x80, 0x3000),
                                       rng.randrange(0x10000, 0x10FFFF))))
                       for _ in range(rng.randrange(1, 6)))
        frag = frag.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text[:i] + frag + text[i:]


def _span(toks: list[str], rng: random.Random) -> tuple[int, int]:
    """A short run of tokens starting at an identifier or number (a sub-expression-ish)."""
    spots = _spots(toks, lambda t: _is_ident(t) or _is_number(t)) or _spots(toks, _is_solid)
    if not spots:
        return 0, 0
    i = rng.choice(spots)
    j = i + 1
    # extend over a bracketed suffix like A[i, j] or f(x)
    if j < len(toks) and toks[j] in "[(":
        close = "]" if toks[j] == "[" else ")"
        depth = 0
        for k in range(j, min(len(toks), j + 60)):
            depth += toks[k] == toks[j]
            depth -= toks[k] == close
            if depth == 0:
                j = k + 1
                break
    return i, j


def repeat_piece(text: str, rng: random.Random, lang: Language) -> str:
    """A sub-expression repeated hundreds of times: ``A + A + ... + A``."""
    toks = tokens(text)
    i, j = _span(toks, rng)
    if i == j:
        return text
    piece = "".join(toks[i:j])
    n = rng.choice((50, 300, 490, 1000, 3000))
    toks[i:j] = [rng.choice(lang.repeat).join([piece] * n)]
    return "".join(toks)


def deep_nest(text: str, rng: random.Random, lang: Language) -> str:
    """A sub-expression wrapped hundreds deep: ``-(-(-(...)))``, ``[[[...]]]``."""
    toks = tokens(text)
    i, j = _span(toks, rng)
    if i == j:
        return text
    opening, closing = rng.choice(lang.nest)
    n = rng.choice((30, 200, 489, 1000, 5000))
    toks[i:j] = [opening * n + "".join(toks[i:j]) + closing * n]
    return "".join(toks)


def truncate(text: str, rng: random.Random, lang: Language) -> str:
    return text[:rng.randrange(len(text) + 1)]


def splice_line(text: str, rng: random.Random, lang: Language) -> str:
    """A line of the text copied to another place (duplicates statements, keys, blocks)."""
    lines = text.split("\n")
    if len(lines) < 2:
        return text
    src = rng.randrange(len(lines))
    lines.insert(rng.randrange(len(lines) + 1), lines[src])
    return "\n".join(lines)


MUTATIONS: tuple[Callable[[str, random.Random, Language], str], ...] = (
    byte_flip, delete_token, duplicate_token, swap_tokens, replace_number, replace_number,
    insert_number, replace_identifier, insert_odd, repeat_piece, deep_nest, truncate,
    splice_line, nudge_number, nudge_number, nudge_number, replace_operator, replace_operator,
)


def mutate_text(text: str, rng: random.Random, lang: Language, count: int | None = None) -> str:
    """``text`` after ``count`` (default: 1 to 3, from ``rng``) random mutations."""
    n = count if count is not None else rng.choice((1, 1, 1, 2, 3))
    for _ in range(n):
        text = rng.choice(MUTATIONS)(text, rng, lang)
    return text


# --- odd values for call arguments ------------------------------------------------------------

def odd_values(rng: random.Random) -> object:
    """A value of a wrong or extreme kind: for arguments that expect an array, a shape, a
    dtype, a mapping or a string."""
    import numpy as np

    choices: list[Callable[[], object]] = [
        lambda: None, lambda: 0, lambda: -1, lambda: 2**63, lambda: 2**64, lambda: 10**400,
        lambda: 1.5, lambda: float("nan"), lambda: float("inf"), lambda: True, lambda: "",
        lambda: "float32", lambda: "float33", lambda: "A", lambda: "\x00", lambda: b"abc",
        lambda: [], lambda: (), lambda: {}, lambda: [1, 2], lambda: (3, -1), lambda: (2**40, 2**40),
        lambda: [None], lambda: {"A": None}, lambda: object(), lambda: np.float32,
        lambda: np.dtype("complex64"), lambda: np.dtype("U3"), lambda: np.dtype("O"),
        lambda: np.zeros(3), lambda: np.zeros((2, 3), np.int8), lambda: np.zeros((0,)),
        lambda: np.array(["x"]), lambda: np.array([None], dtype=object), lambda: np.float64(2.0),
        lambda: np.zeros((3, 4), np.float32)[:, ::2], lambda: np.zeros((4, 4), np.float32).T,
        lambda: np.full((2, 2), np.nan, np.float32), lambda: np.ma.masked_array([1.0]),
        lambda: np.zeros((2, 2), np.float32).view(np.int32), lambda: np.zeros((), np.float32),
        lambda: np.zeros((1, 1, 1, 1, 1, 1, 1, 1), np.float32), lambda: [[1.0, 2.0]],
        lambda: {1, 2}, lambda: range(3), lambda: iter([1]), lambda: Path("/"),
        lambda: np.zeros((2, 3), ">f4"), lambda: np.zeros(5, np.float16),
    ]
    return rng.choice(choices)()


# --- outcome classification ------------------------------------------------------------------

_STRIPE_DIRS = tuple(str(ROOT / d) + os.sep for d in ("stripe", "passes", "codegen"))


def _in_stripe(filename: str) -> bool:
    return filename.startswith(_STRIPE_DIRS)


def is_typed(exc: BaseException) -> bool:
    """A clear error: a ``StripeError`` subclass, or a ``TypeError``/``ValueError`` that a
    ``raise`` statement of stripe's own code raised (not numpy, isl, lark or yaml, nor
    Python on ``len(None)`` in stripe's code)."""
    from stripe.errors import StripeError

    if isinstance(exc, StripeError):
        return True
    if type(exc) in (TypeError, ValueError):
        frames = traceback.extract_tb(exc.__traceback__)
        return bool(frames) and _in_stripe(frames[-1].filename) and \
            (frames[-1].line or "").lstrip().startswith("raise")
    return False


def error_key(exc: BaseException) -> str:
    """A grouping key for an internal error: its type, the deepest stripe frame and the
    raising frame (file:function)."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if _in_stripe(f.filename)]
    where = ""
    if ours:
        f = ours[-1]
        where = f"{Path(f.filename).relative_to(ROOT)}:{f.name}"
    last = ""
    if frames and (not ours or frames[-1] is not ours[-1]):
        f = frames[-1]
        last = f" <- {Path(f.filename).name}:{f.name}"
    return f"{type(exc).__name__} at {where}{last}"


class Timeout(BaseException):
    """Raised by :func:`time_limit` when an example runs too long (a BaseException so that
    no ``except Exception`` in the code under test swallows it)."""


@contextlib.contextmanager
def time_limit(seconds: float, cpu: bool = False) -> Iterator[None]:
    """Raise :class:`Timeout` after ``seconds`` of wall time, or with ``cpu`` of this
    process's CPU time (which a loaded machine does not stretch); main thread only; code
    stuck inside C is interrupted when it returns to Python."""
    if seconds <= 0:
        yield
        return

    def fire(signum: int, frame: object) -> None:
        raise Timeout(f"no answer within {seconds} s{' of CPU' if cpu else ''}")

    sig, timer = (signal.SIGPROF, signal.ITIMER_PROF) if cpu else \
        (signal.SIGALRM, signal.ITIMER_REAL)
    old = signal.signal(sig, fire)
    signal.setitimer(timer, seconds)
    try:
        yield
    finally:
        signal.setitimer(timer, 0)
        signal.signal(sig, old)


@contextlib.contextmanager
def memory_limit(nbytes: int) -> Iterator[None]:
    """Cap the address space of this process (so a runaway allocation is a MemoryError,
    not the machine swapping); restored afterwards."""
    import resource

    old = resource.getrlimit(resource.RLIMIT_AS)
    hard = old[1]
    soft = nbytes if hard == resource.RLIM_INFINITY else min(nbytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, old)


# --- the entry points ------------------------------------------------------------------------
#
# ``check_<entry>(seed)`` builds the seed's input, runs it, and returns a short outcome
# ("ok ...", or "typed <Error>") when the contract holds; it raises :class:`WrongResult`
# when a result differs from the reference interpreter, and lets every other error out.

class WrongResult(AssertionError):
    """A result that differs from the reference interpreter's."""


# Programs the fuzzers start from: the catalogue and the examples.
def _seeds_tile() -> list[tuple[str, str, dict[str, tuple[tuple[int, ...], str]]]]:
    from ops_catalog import OPS

    return [(op.name, op.source, op.input_specs()) for op in OPS]


_CACHE: dict[str, object] = {}


def _cached(key: str, make: Callable[[], object]) -> object:
    if key not in _CACHE:
        _CACHE[key] = make()
    return _CACHE[key]


def tile_seeds() -> list[tuple[str, str, dict[str, tuple[tuple[int, ...], str]]]]:
    """``(name, source, input specs)`` of every catalogue op (the examples among them)."""
    return _cached("tile", _seeds_tile)  # type: ignore[return-value]


def typed_or_raise(exc: BaseException) -> str:
    """``"typed <Type>"`` for a clear error; re-raise anything else."""
    if is_typed(exc):
        return f"typed {type(exc).__name__}"
    raise exc


def input_arrays(program: object, rng: random.Random, special: bool = False) -> dict:
    """Random arrays for the user inputs of a ``#program`` block; ``special``: sprinkle NaN,
    +-inf and integer extremes among the values."""
    import numpy as np

    from stripe import tags
    from stripe.ir import RefDir

    nprng = np.random.default_rng(rng.randrange(2**32))
    out = {}
    for ref in program.refs:  # type: ignore[attr-defined]
        if not (ref.is_alloc and tags.USER in ref.tags and ref.dir in (RefDir.IN,)):
            continue
        dt = np.dtype(ref.dtype.np)
        sizes = ref.shape.sizes
        if dt == np.bool_:
            a = nprng.integers(0, 2, sizes).astype(bool)
        elif dt.kind == "f":
            a = nprng.standard_normal(sizes).astype(dt)
            if special and a.size:
                for v in (np.nan, np.inf, -np.inf, 0.0, -0.0):
                    if nprng.random() < 0.5:
                        a.flat[nprng.integers(a.size)] = v
        else:
            lo, hi = (0, 10) if dt.kind == "u" else (-10, 10)
            a = nprng.integers(lo, hi, sizes).astype(dt)
            if special and a.size:
                info = np.iinfo(dt)
                for v in (info.min, info.max, 0, -1 if dt.kind == "i" else 1):
                    if nprng.random() < 0.5:
                        a.flat[nprng.integers(a.size)] = v
        out[ref.into] = a
    return out


def _limit_size(program: object, limit: int = 2_000_000) -> bool:
    """Whether the program's user buffers total at most ``limit`` elements (inputs the
    fuzzer can afford to make and interpret)."""
    from stripe import tags

    return sum(r.shape.elem_count for r in program.refs  # type: ignore[attr-defined]
               if r.is_alloc and tags.USER in r.tags) <= limit


def assert_same(got: dict, want: dict, what: str) -> None:
    """Outputs equal to the interpreter's: same names, shapes and dtypes; floats within a
    relative 1e-3 (NaN where NaN, infinities equal), integers and bools exact."""
    import numpy as np

    if sorted(got) != sorted(want):
        raise WrongResult(f"{what}: outputs {sorted(got)} != interpreter's {sorted(want)}")
    for name, w in want.items():
        g = np.asarray(got[name])
        if g.shape != w.shape or g.dtype != w.dtype:
            raise WrongResult(f"{what}: {name} is {g.dtype}{g.shape}, interpreter's "
                              f"{w.dtype}{w.shape}")
        if w.dtype.kind == "f":
            finite = np.isfinite(w)
            scale = float(np.max(np.abs(w[finite]), initial=1.0))
            ok = np.isclose(g, w, rtol=1e-3, atol=1e-3 * scale, equal_nan=True)
            if not ok.all():
                i = np.flatnonzero(~ok.ravel())[0]
                raise WrongResult(f"{what}: {name} differs at flat index {i}: got "
                                  f"{g.ravel()[i]!r}, interpreter {w.ravel()[i]!r} "
                                  f"({int((~ok).sum())} of {w.size} differ)")
        elif not np.array_equal(g, w):
            i = np.flatnonzero((g != w).ravel())[0]
            raise WrongResult(f"{what}: {name} differs at flat index {i}: got "
                              f"{g.ravel()[i]!r}, interpreter {w.ravel()[i]!r}")


def _interpret_other_poison(program: object, arrays: dict) -> dict:
    """The interpreter's result with fresh memory filled with ones instead of its usual
    NaN and byte pattern: outputs that differ from the usual run read undefined memory."""
    from unittest import mock

    import numpy as np

    import stripe

    def ones(count: int, dtype: object) -> np.ndarray:
        return np.ones(count, np.dtype(dtype))  # type: ignore[call-overload]

    with mock.patch("stripe.interp_memory._uninitialised", ones):
        return stripe.interpret(program, arrays)  # type: ignore[arg-type]


def exact_config(config: object) -> object:
    """``config`` with every ``pad`` entry's ``finite_math`` off: the pipeline that keeps
    the NaN and infinity rules exactly (docs/semantics.md, "Passes that assume finite
    data"), for inputs that hold them."""
    import dataclasses

    passes = tuple(
        dataclasses.replace(e, options=dataclasses.replace(e.options, finite_math=False))
        if e.type == "pad" and hasattr(e.options, "finite_math") else e
        for e in config.passes)  # type: ignore[attr-defined]
    return dataclasses.replace(config, passes=passes)  # type: ignore[call-overload]


# Where compiled programs run: the host target (no passes) or a shipped config's pipeline.
TARGETS: tuple[str | None, ...] = (None, None, "cpu_generic", "cpu_avx2", "npu_example",
                                   "examples/full_pool", "examples/paper_fig4")


def _interpret_and_compile(program: object, rng: random.Random, compile_rate: float,
                           what: str, special: bool = False, configs: bool = False,
                           defined_only: bool = False) -> str:
    """Interpret ``program`` (a verified block) on random inputs (``special``: with NaN,
    +-inf and integer extremes among them); with probability ``compile_rate`` also compile
    it to C (``configs``: through a random shipped config's pipeline, with the verifier
    after every pass; with ``special`` inputs, :func:`exact_config` of it) and compare.
    ``defined_only``: compare only the outputs the program overwrites whole before reading
    them (``overwritten_outputs``) and whose value does not depend on undefined memory; the
    others hold undefined elements (docs/semantics.md), as mutated IR can leave them."""
    import numpy as np

    import stripe
    from stripe.compiler import compile_program, overwritten_outputs
    from stripe.passes.manager import run_pipeline

    if not _limit_size(program):
        return "ok (too large to run here)"
    arrays = input_arrays(program, rng, special)
    try:
        want = stripe.interpret(program, arrays)  # type: ignore[arg-type]
    except Exception as e:  # noqa: BLE001
        return "interpret " + typed_or_raise(e)
    if rng.random() >= compile_rate:
        return "ok interpreted"
    target = rng.choice(TARGETS) if configs else None
    try:
        if target is None:
            prog = compile_program(program)  # type: ignore[arg-type]
        else:
            config = stripe.load_config(target)
            if special:
                config = exact_config(config)  # type: ignore[assignment]
            final, trace = run_pipeline(program, config, verify=True)  # type: ignore[arg-type]
            prog = compile_program(final, trace, target=config.target, decided=True)
        got = prog.run(arrays)
    except Exception as e:  # noqa: BLE001
        return "compile " + typed_or_raise(e)
    if defined_only:
        defined = overwritten_outputs(program)  # type: ignore[arg-type]
        got = {k: v for k, v in got.items() if k in defined}
        want = {k: v for k, v in want.items() if k in defined}
        other = _interpret_other_poison(program, arrays)
        for k in list(want):  # outputs that depend on undefined temporaries
            if not np.array_equal(want[k], other[k], equal_nan=True):
                del want[k], got[k]
    assert_same(got, want, f"{what} on {target or 'host'}")
    return "ok compiled"


def tile_input(seed: int) -> tuple[str, str, dict]:
    """The mutated Tile program of ``seed``: ``(op name, source, input specs)``."""
    rng = random.Random(seed)
    name, source, specs = rng.choice(tile_seeds())
    specs = {k: (tuple(s), d) for k, (s, d) in specs.items()}
    r = rng.random()
    if r < 0.8:
        source = mutate_text(source, rng, TILE)
    elif r < 0.95:
        key = rng.choice(sorted(specs)) if specs else None
        if key is not None:
            shape, dtype = specs[key]
            choice = rng.randrange(5)
            if choice == 0 and shape:
                shape = list(shape)
                shape[rng.randrange(len(shape))] = int(float(rng.choice(
                    ("0", "-1", "1", "2147483648", "9223372036854775808", "1e18", "3"))))
                shape = tuple(shape)
            elif choice == 1:
                dtype = rng.choice(("float16", "float64", "int8", "uint8", "int64", "bool",
                                    "float33", "", "complex64", "object"))
            elif choice == 2:
                shape = shape + (rng.choice((1, 2, 0)),)
            elif choice == 3:
                shape = shape[:-1]
            if choice == 4:
                specs.pop(key)
                specs[rng.choice(("Z", key + "x", "_", ""))] = (shape, dtype)
            else:
                specs[key] = (shape, dtype)
    else:
        source = mutate_text(source, rng, TILE, count=rng.randrange(4, 10))
    return name, source, specs


def check_tile(seed: int, compile_rate: float = 0.2) -> str:
    """Lower the mutated Tile of ``seed``; see :func:`check_tile_source`."""
    name, source, specs = tile_input(seed)
    rng = random.Random(seed + 1)
    return check_tile_source(source, specs, rng, compile_rate, f"tile seed {seed} ({name})",
                             special=rng.random() < 0.5)


def check_tile_source(source: str, specs: object, rng: random.Random,
                      compile_rate: float = 1.0, what: str = "tile",
                      special: bool = False) -> str:
    """Lower ``source``; when it lowers, verify, interpret and (with probability
    ``compile_rate``) compile, for the host or through a shipped config, and compare with
    the interpreter (``special``: inputs with NaN, +-inf and integer extremes)."""
    import stripe

    try:
        program = stripe.lower(source, specs)  # type: ignore[arg-type]
    except Exception as e:  # noqa: BLE001
        return "lower " + typed_or_raise(e)
    stripe.verify(program)  # a lowered program must verify: any error here is a bug
    return _interpret_and_compile(program, rng, compile_rate, what, special, configs=True)


def _ir_texts() -> list[tuple[str, str]]:
    import stripe
    from stripe.config import Config
    from stripe.passes.manager import run_pipeline
    from stripe.target import HOST

    out = []
    for name, source, specs in tile_seeds():
        program = stripe.lower(source, specs)
        out.append((name, stripe.print_ir(program)))
        if len(out) % 4 == 0:  # some optimised programs: decision tags, fused blocks
            final, _ = run_pipeline(program, Config("host", HOST))
            out.append((name + "/host", stripe.print_ir(final)))
    return out


def ir_texts() -> list[tuple[str, str]]:
    """``(name, printed IR)`` of every catalogue op, and of some after the host pipeline."""
    return _cached("ir", _ir_texts)  # type: ignore[return-value]


def ir_input(seed: int) -> tuple[str, str]:
    rng = random.Random(seed)
    name, text = rng.choice(ir_texts())
    return name, mutate_text(text, rng, IR)


def check_ir(seed: int, compile_rate: float = 0.2) -> str:
    """Parse the mutated IR text of ``seed``; see :func:`check_ir_text`."""
    name, text = ir_input(seed)
    rng = random.Random(seed + 1)
    return check_ir_text(text, rng, compile_rate, f"ir seed {seed} ({name})",
                         special=rng.random() < 0.5, configs="/host" not in name)


def check_ir_text(text: str, rng: random.Random, compile_rate: float = 1.0,
                  what: str = "ir", special: bool = False, configs: bool = False) -> str:
    """Parse ``text``; when it parses, print and parse it again (the same block), verify;
    when it verifies, interpret and (with probability ``compile_rate``) compile
    (``configs``: sometimes through a shipped config's passes, for lowered programs) and
    compare."""
    import stripe

    try:
        program = stripe.parse_ir(text)
    except Exception as e:  # noqa: BLE001
        return "parse " + typed_or_raise(e)
    printed = stripe.print_ir(program)  # print_ir and parse_ir are inverses (compared as
    try:  # text: NaN != NaN in blocks)
        again = stripe.print_ir(stripe.parse_ir(printed))
    except Exception as e:  # noqa: BLE001
        raise WrongResult(f"{what}: the printed text of a parsed block does not parse: "
                          f"{type(e).__name__}: {e}") from e
    if again != printed:
        raise WrongResult(f"{what}: parse_ir(print_ir(block)) differs from the block")
    try:
        stripe.verify(program)
    except Exception as e:  # noqa: BLE001
        return "verify " + typed_or_raise(e)
    return _interpret_and_compile(program, rng, compile_rate, what, special, configs,
                                  defined_only=True)


def yaml_seeds() -> list[tuple[str, str]]:
    """``(file name, text)`` of every shipped config and example config."""
    def make() -> list[tuple[str, str]]:
        files = sorted((ROOT / "hwconfigs").glob("*.yaml"))
        files += sorted((ROOT / "hwconfigs" / "examples").glob("*.yaml"))
        return [(f.name, f.read_text()) for f in files]
    return _cached("yaml", make)  # type: ignore[return-value]


def yaml_input(seed: int) -> tuple[str, str]:
    rng = random.Random(seed)
    name, text = rng.choice(yaml_seeds())
    return name, mutate_text(text, rng, YAML)


def check_yaml(seed: int, workdir: Path, compile_rate: float = 0.3) -> str:
    """Load the mutated config of ``seed`` from a file in ``workdir``; when it loads, run
    its pipeline on a small program and (sometimes) compile and compare."""
    name, text = yaml_input(seed)
    return check_yaml_text(name, text, workdir, random.Random(seed + 1), compile_rate,
                           f"yaml seed {seed} ({name})")


def check_yaml_text(name: str, text: str, workdir: Path, rng: random.Random,
                    compile_rate: float = 1.0, what: str = "yaml") -> str:
    """Write ``text`` to ``workdir/name`` and load it as a config; when it loads, run its
    pipeline on a small catalogue program and compare the result (interpreted, or with
    probability ``compile_rate`` compiled) with the interpreter's on the lowered program."""
    import stripe
    from stripe.compiler import compile_program
    from stripe.passes.manager import run_pipeline

    path = workdir / name
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    try:
        config = stripe.load_config(path)
    except Exception as e:  # noqa: BLE001
        return "load " + typed_or_raise(e)
    op_name, source, specs = rng.choice([t for t in tile_seeds() if t[0] in _SMALL_OPS])
    program = stripe.lower(source, specs)
    try:
        final, trace = run_pipeline(program, config, verify=True)
    except Exception as e:  # noqa: BLE001
        return "pipeline " + typed_or_raise(e)
    arrays = input_arrays(program, rng)
    want = stripe.interpret(program, arrays)
    if rng.random() >= compile_rate:
        got = stripe.interpret(final, arrays)
        assert_same(got, want, f"{what}, {op_name}: final IR interpreted")
        return "ok pipeline"
    try:
        prog = compile_program(final, trace, target=config.target, decided=True)
        got = prog.run(arrays)
    except Exception as e:  # noqa: BLE001
        return "compile " + typed_or_raise(e)
    assert_same(got, want, f"{what}, {op_name}: compiled")
    return "ok compiled"


_SMALL_OPS = ("matmul", "softmax", "conv2d", "maxpool2x2", "sum_axis0", "bias_relu",
              "layer_norm", "max_rows", "two_outputs", "depthwise_conv2d")


# --- call arguments --------------------------------------------------------------------------

_ARG_OPS = ("matmul", "softmax", "two_outputs", "scalar_broadcast", "int8_elementwise",
            "bool_select", "sum_all")


def _compiled(name: str) -> tuple[object, object]:
    """``(lowered program, compiled Program)`` of a catalogue op, compiled once."""
    import stripe
    from stripe.compiler import compile_program

    def make() -> tuple[object, object]:
        src = dict((n, (s, sp)) for n, s, sp in tile_seeds())[name]
        program = stripe.lower(*src)
        return program, compile_program(program)
    return _cached("compiled/" + name, make)  # type: ignore[return-value]


def mutate_mapping(arrays: dict, rng: random.Random) -> object:
    """A mutation of a name -> array mapping: a key dropped, added or renamed, a value of a
    wrong kind, shape, dtype or layout (some of which are valid: non-contiguous, read-only,
    NaN-filled arrays must give the right result), or not a mapping at all."""
    import numpy as np

    arrays = dict(arrays)
    names = sorted(arrays)
    kind = rng.randrange(14)
    name = rng.choice(names) if names else "A"
    a = arrays.get(name, np.zeros(3, np.float32))
    if kind == 0 and names:
        arrays.pop(name)
    elif kind == 1:
        arrays[rng.choice(("Z", "", "a" * 200, "\x00", name + " "))] = odd_values(rng)
    elif kind == 2:
        arrays[name] = odd_values(rng)
    elif kind == 3:
        arrays[name] = np.zeros(a.shape + (2,), a.dtype)
    elif kind == 4 and a.ndim:
        shape = list(a.shape)
        shape[rng.randrange(len(shape))] += rng.choice((-1, 1))
        arrays[name] = np.zeros(tuple(max(0, d) for d in shape), a.dtype)
    elif kind == 5:
        arrays[name] = a.astype(rng.choice((np.float64, np.float16, np.int32, np.int64,
                                            np.bool_, np.uint8, np.complex64)))
    elif kind == 6:
        big = np.repeat(a, 2, axis=-1) if a.ndim else a
        arrays[name] = big[..., ::2] if a.ndim else a  # non-contiguous, same values
    elif kind == 7:
        b = a.copy()
        b.setflags(write=False)
        arrays[name] = b
    elif kind == 8:
        arrays[name] = a.tolist()
    elif kind == 9:
        return rng.choice((None, [], list(arrays.items()), "A", 3, set(names), arrays.values()))
    elif kind == 10:
        arrays[rng.choice((1, None, b"A", ("A",)))] = a  # type: ignore[index]
        arrays.pop(name, None)
    elif kind == 11:
        arrays[name] = np.asfortranarray(a) if a.ndim > 1 else a[..., None][..., 0]
    elif kind == 12 and a.dtype.kind == "f" and a.size:
        b = a.copy()
        b.flat[rng.randrange(b.size)] = rng.choice((np.nan, np.inf, -np.inf))
        arrays[name] = b
    elif kind == 13:
        arrays[name] = a.astype(a.dtype.newbyteorder(">")) if a.dtype.itemsize > 1 else a
    return arrays


def check_arguments_case(seed: int) -> str:
    """One call of ``stripe.arrays.*``, ``stripe.lower``, ``stripe.compile``,
    ``Program.run`` or ``stripe.interpret`` with mutated arguments."""
    import numpy as np

    import stripe

    rng = random.Random(seed)
    which = rng.choice(("arrays", "lower", "compile", "run", "run", "run", "interpret"))
    if which == "arrays":
        fn = rng.choice(("empty", "zeros", "aligned"))
        valid: dict[str, object] = {"shape": (3, 5), "dtype": np.float32, "alignment": 64}
        for key in valid:
            if rng.random() < 0.5:
                valid[key] = odd_values(rng)
        try:
            if fn == "aligned":
                got = stripe.arrays.aligned(odd_values(rng) if rng.random() < 0.7
                                            else np.arange(6.0), valid["alignment"])
            else:
                got = getattr(stripe.arrays, fn)(valid["shape"], valid["dtype"],
                                                 valid["alignment"])
        except Exception as e:  # noqa: BLE001
            return f"arrays.{fn} " + typed_or_raise(e)
        if not isinstance(got, np.ndarray):
            raise WrongResult(f"arrays.{fn} returned {type(got).__name__}")
        return f"ok arrays.{fn}"
    name = rng.choice(_ARG_OPS)
    program, prog = _compiled(name)
    source = dict((n, s) for n, s, _ in tile_seeds())[name]
    arrays = input_arrays(program, rng)
    if which == "lower":
        specs = {k: (v.shape, str(v.dtype)) for k, v in arrays.items()}
        if rng.random() < 0.5:
            specs = mutate_mapping(arrays, rng)  # arrays are valid inputs to lower too
        elif specs:
            k = rng.choice(sorted(specs))
            specs[k] = rng.choice(((odd_values(rng), specs[k][1]), (specs[k][0], odd_values(rng)),
                                   odd_values(rng), (specs[k][0],), specs[k] + (1,)))
        try:
            stripe.lower(source, specs)  # type: ignore[arg-type]
        except Exception as e:  # noqa: BLE001
            return "lower " + typed_or_raise(e)
        return "ok lower"
    if which == "compile":
        target = rng.choice((None, None, "", "cpu_generic", "nope", "/etc/passwd", "/dev/null",
                             "/", "../x.yaml", 3, b"cpu_avx2", Path("cpu_generic")))
        inputs = mutate_mapping(arrays, rng) if rng.random() < 0.7 else arrays
        src: object = source if rng.random() < 0.8 else odd_values(rng)
        try:
            compiled = stripe.compile(src, inputs, target)  # type: ignore[arg-type]
        except Exception as e:  # noqa: BLE001
            return "compile " + typed_or_raise(e)
        if isinstance(inputs, dict) and all(isinstance(v, np.ndarray) for v in inputs.values()):
            try:
                got = compiled.run(inputs)
            except Exception as e:  # noqa: BLE001
                return "compile+run " + typed_or_raise(e)
            lowered = stripe.lower(src, inputs)  # type: ignore[arg-type]
            assert_same(got, stripe.interpret(lowered, inputs), f"arguments seed {seed}")
        return "ok compile"
    if which == "interpret":
        inputs = mutate_mapping(arrays, rng)
        try:
            stripe.interpret(program, inputs)  # type: ignore[arg-type]
        except Exception as e:  # noqa: BLE001
            return "interpret " + typed_or_raise(e)
        return "ok interpret"
    # Program.run with mutated inputs and/or out=
    inputs = mutate_mapping(arrays, rng) if rng.random() < 0.6 else arrays
    out: object = None
    if rng.random() < 0.5:
        want = stripe.interpret(program, arrays)
        out = {k: np.empty_like(v) for k, v in want.items()}
        choice = rng.randrange(6)
        if choice == 0:
            out = mutate_mapping(out, rng)  # type: ignore[arg-type]
        elif choice == 1 and arrays:
            k = rng.choice(sorted(want))
            shared = rng.choice(sorted(arrays))
            out[k] = arrays[shared]  # type: ignore[index]
        elif choice == 2:
            k = rng.choice(sorted(want))
            out[k] = want[k]  # type: ignore[index]  # valid (a distinct array)
        elif choice == 3:
            out = rng.choice(([], None, "C", [np.zeros(1)], odd_values(rng)))
    expected_inputs = {k: np.array(v, copy=True) if isinstance(v, np.ndarray) else v
                       for k, v in inputs.items()} if isinstance(inputs, dict) else inputs
    try:
        got = prog.run(inputs, out=out)  # type: ignore[attr-defined]
    except Exception as e:  # noqa: BLE001
        return "run " + typed_or_raise(e)
    try:
        want = stripe.interpret(program, expected_inputs)  # type: ignore[arg-type]
    except Exception as e:  # noqa: BLE001
        typed_or_raise(e)
        return "ok run (the interpreter refuses these inputs)"
    assert_same(got, want, f"arguments seed {seed} ({name}, run)")
    return "ok run"


# --- the command line ------------------------------------------------------------------------

def _cli_bases(workdir: Path) -> list[list[str]]:
    ex = str(ROOT / "examples")
    mm = [f"{ex}/matmul.tile", "-i", "A=5x7:float32", "-i", "B=7x3:float32"]
    sm = [f"{ex}/softmax.tile", "-i", "I=4x9"]
    mp = [f"{ex}/maxpool.tile", "-i", "I=1x6x6x3"]
    return [
        ["show", *mm], ["show", *sm],
        ["run", *mm, "--check", "--repeat", "1"], ["run", *sm, "--interpret"],
        ["run", *mp, "--check", "--repeat", "1", "--seed", "3"],
        ["run", *mm, "--target", "cpu_generic", "--stats", "--repeat", "1"],
        ["compile", *sm, "--dump-dir", "dump"],
        ["passes"], ["configs"],
    ]


_CLI_VALUES: tuple[str, ...] = (
    "-1", "0", "9223372036854775808", "1e3", "", "-", "--", "/dev/null", "/etc/passwd",
    "/proc/self/status", "a/b", "..", "nope.tile", "A=0x0", "A=99999999999x99999999999",
    "A=:int32", "A=3x:float32", "=3", "A=3:float99", "A=2x2:bool", "cpu_avx512", "npu_example",
    "--seed", "--repeat", "--target", "--input", "-i", "--check", "--interpret", "--stats",
    "--dump-dir", "--nope", "show", "run", "\x00", "\u00e9", "A=4x9", "I=4x9:float64",
)


def cli_input(seed: int, workdir: Path) -> list[str]:
    rng = random.Random(seed)
    argv = list(rng.choice(_cli_bases(workdir)))
    for _ in range(rng.choice((1, 1, 2, 3))):
        op = rng.randrange(7)
        i = rng.randrange(len(argv)) if argv else 0
        if op == 0 and argv:
            argv[i] = rng.choice(_CLI_VALUES)
        elif op == 1 and argv:
            del argv[i]
        elif op == 2 and argv:
            argv.insert(i, argv[i])
        elif op == 3:
            argv.insert(i, rng.choice(_CLI_VALUES))
        elif op == 4 and argv:
            argv[i] = mutate_text(argv[i], rng, TEXT)
        elif op == 5:
            argv += [rng.choice(("--seed", "--repeat", "--target", "-i", "--dump-dir")),
                     rng.choice(_CLI_VALUES)]
        elif op == 6:  # a mutated Tile file
            _, source, _ = rng.choice(tile_seeds())
            path = workdir / f"m{seed}.tile"
            path.write_text(mutate_text(source, rng, TILE), errors="surrogateescape")
            files = [j for j, a in enumerate(argv) if a.endswith(".tile")]
            if files:
                argv[files[0]] = str(path)
    return [a for a in argv if a != "--debug"]


def check_cli(seed: int, workdir: Path) -> str:
    """``stripe.cli.main(argv)`` in-process on the mutated argument list of ``seed``: a
    return code (0, or 2 with one line on stderr), argparse's exit, never a traceback; exit
    status 1 (``--check`` found a difference from the interpreter) is a wrong result."""


    return check_cli_argv(cli_input(seed, workdir), workdir)


def check_cli_argv(argv: list[str], workdir: Path) -> str:
    """``stripe.cli.main(argv)`` with the working directory two levels inside ``workdir``
    (relative dump folders, ``..`` and ``../..`` included, stay in it): see
    :func:`check_cli`. Exit status 3 (stripe's internal error) is a bug."""
    import io

    from stripe import cli

    cwd = workdir / "c" / "d"
    cwd.mkdir(parents=True, exist_ok=True)
    out, err = io.StringIO(), io.StringIO()
    previous = os.getcwd()
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 2
        if code not in (0, 2):
            raise WrongResult(f"argparse exit {code} for {argv!r}") from None
        return f"exit {code}"
    finally:
        os.chdir(previous)
    if code == 3:
        raise RuntimeError(f"stripe {argv!r}: {err.getvalue().strip()[-1500:]}")
    if code == 1:
        raise WrongResult(f"stripe {' '.join(argv)} reported a difference from the "
                          f"interpreter:\n{out.getvalue()[-2000:]}")
    if code == 2:
        lines = err.getvalue().strip().splitlines()
        if not lines or not lines[0].startswith("stripe: error:"):
            raise WrongResult(f"exit 2 without an error line for {argv!r}: {err.getvalue()!r}")
    return f"exit {code}"


def check_catalogue(seed: int) -> str:
    """A catalogue program, unmutated, on inputs with NaN, +-inf and integer extremes,
    compiled for the host or through a shipped config: the C equals the interpreter."""
    import stripe

    rng = random.Random(seed)
    name, source, specs = rng.choice(tile_seeds())
    program = stripe.lower(source, specs)
    return _interpret_and_compile(program, rng, 1.0, f"catalogue seed {seed} ({name})",
                                  special=True, configs=True)


ENTRIES = ("tile", "ir", "yaml", "arguments", "cli", "catalogue")


def run_entry(entry: str, seed: int, workdir: Path, compile_rate: float = 0.2) -> str:
    """Run one input of ``entry``; see ``check_<entry>``."""
    if entry == "tile":
        return check_tile(seed, compile_rate)
    if entry == "ir":
        return check_ir(seed, compile_rate)
    if entry == "yaml":
        return check_yaml(seed, workdir, compile_rate)
    if entry == "arguments":
        return check_arguments_case(seed)
    if entry == "cli":
        return check_cli(seed, workdir)
    if entry == "catalogue":
        return check_catalogue(seed)
    raise ValueError(f"entry must be one of {ENTRIES}, got {entry!r}")


# --- the campaign ----------------------------------------------------------------------------

def _worker(entry: str, start: int, stop: int, workdir: Path, results: Path, rate: float,
            limit: float) -> None:
    """Run seeds ``start..stop-1`` of ``entry``, appending ``B seed`` before and a result
    line after each to ``results`` (the driver restarts past a seed that never ends)."""
    import json
    import time

    workdir.mkdir(parents=True, exist_ok=True)
    with open(results, "a", buffering=1) as f, memory_limit(8 * 2**30):
        for seed in range(start, stop):
            f.write(f"B\t{seed}\n")
            t0 = time.monotonic()
            status, key, msg = "ok", "", ""
            try:
                with time_limit(limit, cpu=True):
                    msg = run_entry(entry, seed, workdir, rate)
                status = "typed" if "typed" in msg or msg == "exit 2" else "ok"
            except Timeout as e:
                status, key = "timeout", error_key(e)
                msg = "".join(traceback.format_exception(e)[-6:])[-1500:]
            except WrongResult as e:
                status, key, msg = "wrong", "WrongResult", str(e)[:1500]
            except BaseException as e:  # noqa: BLE001  (everything else is a finding)
                if isinstance(e, KeyboardInterrupt):
                    raise
                status, key = "internal", error_key(e)
                msg = "".join(traceback.format_exception(e)[-4:])[-1500:]
            row = {"seed": seed, "status": status, "key": key, "msg": msg,
                   "secs": round(time.monotonic() - t0, 2)}
            f.write("E\t" + json.dumps(row) + "\n")


def _campaign(entries: list[str], start: int, count: int, out: Path, rate: float,
              limit: float, hang: float) -> None:
    """Run every entry's seeds in a worker subprocess, restarting it past a seed that
    crashes it or hangs longer than ``hang`` seconds; write ``out/<entry>.jsonl``."""
    import json
    import subprocess
    import sys
    import time

    out.mkdir(parents=True, exist_ok=True)
    for entry in entries:
        results = out / f"{entry}.jsonl"
        done: set[int] = set()
        if results.exists():
            for line in results.read_text().splitlines():
                if line.startswith("E\t"):
                    done.add(json.loads(line[2:])["seed"])
        seed = start
        while seed < start + count:
            while seed in done:
                seed += 1
            if seed >= start + count:
                break
            stop = start + count
            mark = results.stat().st_size if results.exists() else 0
            log = open(out / f"{entry}.log", "a")
            proc = subprocess.Popen(
                [sys.executable, __file__, "worker", entry, str(seed), str(stop),
                 str(out / "work" / entry), str(results), str(rate), str(limit)],
                stdout=log, stderr=subprocess.STDOUT)
            current, since = None, time.monotonic()
            while True:
                time.sleep(0.5)
                text = results.read_text()[mark:] if results.exists() else ""
                lines = text.splitlines()
                began = [int(x[2:]) for x in lines if x.startswith("B\t")]
                ended = [json.loads(x[2:])["seed"] for x in lines if x.startswith("E\t")]
                done.update(ended)
                last_b = began[-1] if began else None
                if last_b != current:
                    current, since = last_b, time.monotonic()
                open_seed = last_b if last_b is not None and last_b not in done else None
                rc = proc.poll()
                if rc is not None or (open_seed is not None
                                      and time.monotonic() - since > hang):
                    if rc is None:
                        proc.kill()
                        proc.wait()
                        status = "hang"
                        msg = f"no answer within {hang} s (killed)"
                    else:
                        status = "crash" if open_seed is not None else "done"
                        msg = f"worker exited with {rc}"
                    if open_seed is not None:
                        row = {"seed": open_seed, "status": status,
                               "key": f"{status} ({msg})", "msg": msg, "secs": None}
                        with open(results, "a") as f:
                            f.write("E\t" + json.dumps(row) + "\n")
                        done.add(open_seed)
                    seed = (open_seed + 1) if open_seed is not None else stop
                    if status == "done":
                        seed = max([seed, *[s + 1 for s in ended]]) if ended else stop
                    break
            log.close()


def _summary(out: Path) -> str:
    """Counts per entry and status, and each internal error, wrong result, hang and crash
    grouped by key with its count and first seeds."""
    import json
    from collections import Counter, defaultdict

    text = []
    for results in sorted(out.glob("*.jsonl")):
        rows = [json.loads(x[2:]) for x in results.read_text().splitlines()
                if x.startswith("E\t")]
        counts = Counter(r["status"] for r in rows)
        text.append(f"== {results.stem}: {len(rows)} inputs {dict(sorted(counts.items()))}")
        groups: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            if r["status"] not in ("ok", "typed"):
                groups[r["key"]].append(r)
        for key, rs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            seeds = sorted(r["seed"] for r in rs)[:8]
            text.append(f"  {len(rs):5d}  {key}  seeds {seeds}")
            text.append("         " + rs[0]["msg"].strip().replace("\n", "\n         ")[-600:])
    return "\n".join(text)


def _recheck(out: Path) -> None:
    """Run again (in this process, one at a time) every seed of a campaign that did not
    end well, and print per key how many still fail."""
    import json
    import tempfile
    from collections import Counter

    for results in sorted(out.glob("*.jsonl")):
        rows = [json.loads(x[2:]) for x in results.read_text().splitlines()
                if x.startswith("E\t")]
        bad = [r for r in rows if r["status"] not in ("ok", "typed")]
        still: Counter[str] = Counter()
        total: Counter[str] = Counter()
        for r in bad:
            total[r["key"]] += 1
            if r["status"] in ("hang", "crash", "timeout"):
                still[r["key"]] += 1  # not re-run here: a new campaign does
                continue
            try:
                with time_limit(20):
                    run_entry(results.stem, r["seed"], Path(tempfile.mkdtemp()), 1.0)
            except BaseException as e:  # noqa: BLE001
                if isinstance(e, KeyboardInterrupt):
                    raise
                if not is_typed(e):
                    still[r["key"]] += 1
        print(f"== {results.stem}")
        for key, n in total.most_common():
            print(f"  {still[key]:4d} of {n:4d} still fail  {key}")


def _show(entry: str, seed: int, workdir: Path) -> str:
    if entry == "tile":
        name, source, specs = tile_input(seed)
        return f"# {name}\nspecs = {specs!r}\nsource = {source!r}"
    if entry in ("ir", "yaml"):
        import difflib

        name, text = ir_input(seed) if entry == "ir" else yaml_input(seed)
        rng = random.Random(seed)
        _, original = rng.choice(ir_texts() if entry == "ir" else yaml_seeds())
        diff = difflib.unified_diff(original.splitlines(), text.splitlines(), lineterm="", n=1)
        return f"# {name}\n" + "\n".join(line[:300] for line in diff)
    if entry == "cli":
        return f"argv = {cli_input(seed, workdir)!r}"
    return f"check_arguments_case({seed})"


def main(argv: list[str]) -> None:
    import argparse
    import tempfile

    p = argparse.ArgumentParser(prog="fuzzing.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("campaign")
    c.add_argument("--entries", default=",".join(ENTRIES))
    c.add_argument("--start", type=int, default=0)
    c.add_argument("--count", type=int, default=2000)
    c.add_argument("--out", default="/tmp/stripe-fuzz")
    c.add_argument("--compile-rate", type=float, default=0.2)
    c.add_argument("--limit", type=float, default=20.0, help="CPU seconds per input")
    c.add_argument("--hang", type=float, default=60.0, help="seconds before a kill")
    w = sub.add_parser("worker")
    for a in ("entry", "start", "stop", "workdir", "results", "rate", "limit"):
        w.add_argument(a)
    s = sub.add_parser("summary")
    s.add_argument("--out", default="/tmp/stripe-fuzz")
    sh = sub.add_parser("show")
    sh.add_argument("entry")
    sh.add_argument("seed", type=int)
    rc = sub.add_parser("recheck", help="re-run the failing seeds of a campaign")
    rc.add_argument("--out", default="/tmp/stripe-fuzz")
    r = sub.add_parser("run")
    r.add_argument("entry")
    r.add_argument("seed", type=int)
    args = p.parse_args(argv)
    os.environ.setdefault("STRIPE_MAX_BYTES", str(2**28))
    if args.cmd == "campaign":
        out = Path(args.out)
        os.environ.setdefault("STRIPE_CACHE_DIR", str(out / "cache"))
        _campaign(args.entries.split(","), args.start, args.count, out, args.compile_rate,
                  args.limit, args.hang)
        print(_summary(out))
    elif args.cmd == "worker":
        _worker(args.entry, int(args.start), int(args.stop), Path(args.workdir),
                Path(args.results), float(args.rate), float(args.limit))
    elif args.cmd == "summary":
        print(_summary(Path(args.out)))
    elif args.cmd == "recheck":
        _recheck(Path(args.out))
    elif args.cmd == "show":
        print(_show(args.entry, args.seed, Path(tempfile.mkdtemp())))
    else:
        print(run_entry(args.entry, args.seed, Path(tempfile.mkdtemp()), 1.0))


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main(sys.argv[1:])


# --- for the hypothesis tests ----------------------------------------------------------------

def is_long_profile() -> bool:
    """Whether pytest runs with ``--hypothesis-profile=long``."""
    from hypothesis import settings

    return settings._current_profile == "long"  # type: ignore[attr-defined]


def fuzz_settings(default: int, long: int | None = None) -> object:
    """Hypothesis settings for a fuzz test: ``default`` examples, derandomized (the same
    seeds on every run) by default; under the ``long`` profile ``long`` examples (default
    ``4 * default``, at least the profile's count), freshly drawn. ``STRIPE_FUZZ_SCALE``
    multiplies either count. No deadline (the per-example limit is :func:`checked`'s) and no
    shrinking (a smaller seed is an unrelated input)."""
    from hypothesis import HealthCheck, Phase, settings

    is_long = is_long_profile()
    n = max(long or 4 * default, settings.default.max_examples) if is_long else default
    n = max(1, int(n * float(os.environ.get("STRIPE_FUZZ_SCALE", "1"))))
    return settings(max_examples=n, deadline=None, derandomize=not is_long, database=None,
                    phases=(Phase.explicit, Phase.generate),
                    suppress_health_check=list(HealthCheck))


def checked(fn: Callable[..., str], seed: int, *args: object, limit: float = 20.0) -> str:
    """``fn(seed, *args)`` within ``limit`` seconds of CPU time (and 5 times that of wall
    time, for a loaded machine); a timeout fails as an AssertionError naming the seed
    (``python tests/fuzzing.py show ENTRY SEED`` prints its input)."""
    try:
        with time_limit(5 * limit), time_limit(limit, cpu=True):
            return fn(seed, *args)
    except Timeout:
        raise AssertionError(f"seed {seed}: no answer within {limit} s") from None
