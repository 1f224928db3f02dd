"""The core of the op library: symbolic tensors, the ``emit`` primitive and ``function``.

An op is a Python function on :class:`Tensor` objects that writes one or more Tile
statements with :func:`emit`. :func:`function` walks the graph from its outputs and writes
the Tile function: input declarations with integer sizes, one statement per line in creation
order. Elementwise statements used exactly once by another elementwise statement are written
inside it (``Y = max(Conv + B, 0);`` rather than two statements), so a chain of elementwise
ops becomes the one statement a person would write. The result (:class:`Function`) has the
``tile_source``/``tile_inputs`` attributes that ``stripe.lower`` and ``stripe.compile``
accept (``stripe/tile/source.py``).

Everything here is deterministic: names, order and text depend only on the order in which
tensors were created and on the names given.
"""

from __future__ import annotations

import itertools
import math
import numbers
import re
import string
from collections.abc import Mapping, Sequence

import numpy as np

from ..dtypes import DType, promote, to_dtype
from ..errors import ArgumentError, ArgumentTypeError, StripeError

__all__ = [
    "Function",
    "Tensor",
    "broadcast_shapes",
    "constant",
    "emit",
    "equal",
    "function",
    "gradient",
    "input",
    "not_equal",
    "result_dtype",
]

_UPPER = re.compile(r"[A-Z][A-Za-z0-9_]*\Z")
_PLACEHOLDER = re.compile(r"\{(O|[0-9]+)\}")
_ELEMENTWISE = re.compile(r"\{O\}\s*=(?!=)\s*(.*)\Z", re.S)
# functions whose tensor argument must be a name, not an expression
_NAME_ARG = re.compile(r"\b(index|reshape|gather|scatter|shape|prng)\s*\(\s*\Z")
_SPECIAL_RHS = re.compile(r"(reshape|gather|scatter|prng)\s*\(")
_CREATION = itertools.count()


def _dtype_name(dtype: object, what: str) -> str:
    if not isinstance(dtype, (str, DType, np.dtype, type)):
        raise ArgumentTypeError(f"{what} must be a dtype name such as 'float32', got "
                                f"{type(dtype).__name__}")
    try:
        return to_dtype(dtype).long_name
    except StripeError as e:
        raise ArgumentError(f"{what}: {e}") from None


def _shape(shape: object, what: str) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise ArgumentTypeError(f"{what} must be a sequence of ints, got "
                                f"{type(shape).__name__}")
    out = []
    for s in shape:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise ArgumentTypeError(f"{what} must be a sequence of ints, got an element of "
                                    f"type {type(s).__name__}")
        if s < 0:
            raise ArgumentError(f"{what}: sizes must be >= 0, got {tuple(shape)}")
        out.append(int(s))
    return tuple(out)


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str):
        raise ArgumentTypeError(f"{what} must be a str, got {type(name).__name__}")
    if not _UPPER.match(name):
        raise ArgumentError(f"{what}: {name!r} is not a Tile tensor name "
                            f"([A-Z][A-Za-z0-9_]*)")
    return name


class Tensor:
    """A symbolic tensor: an input, a constant, or the result of a Tile statement.

    ``shape`` (a tuple of ints) and ``dtype`` (a numpy-style name) are what the statement
    produces. Python operators write elementwise Tile with numpy broadcasting and Tile's
    dtype rules (Python numbers are weak literals): ``+ - * / %``, unary ``-`` and ``abs``,
    ``< > <= >=`` (bool results), ``& | ^ ~`` on integers and bools. ``==`` and ``!=`` keep
    their Python meaning (identity), so tensors stay hashable: use ``ops.equal`` and
    ``ops.not_equal``. Indexing (``x[1:, ::-1, None]``) is ``ops.getitem``.
    """

    __slots__ = ("shape", "dtype", "_kind", "_template", "_operands", "_prefix", "_order",
                 "_weak", "_text", "_value")
    __array_ufunc__ = None  # numpy defers to the reflected operators below

    shape: tuple[int, ...]
    dtype: str

    def __init__(self, kind: str, shape: tuple[int, ...], dtype: str, *, prefix: str,
                 template: str = "", operands: tuple[Tensor, ...] = (), weak: bool = False,
                 text: str = "", value: int | float | bool | None = None) -> None:
        self._kind = kind              # "input", "stmt" or "literal"
        self.shape = shape
        self.dtype = dtype
        self._prefix = prefix          # the input's name, or a prefix for a fresh name
        self._template = template      # for "stmt": the statement with {O}, {0}, ...
        self._operands = operands
        self._weak = weak              # a literal without a dtype of its own
        self._text = text              # for "literal": its Tile text
        self._value = value            # for "literal": its Python value
        self._order = next(_CREATION)

    @property
    def ndim(self) -> int:
        """The rank."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return math.prod(self.shape)

    @property
    def name(self) -> str:
        """The input's name, or the prefix of the name :func:`function` gives the result."""
        return self._prefix

    def __repr__(self) -> str:
        what = {"input": f"input {self._prefix}", "literal": f"constant {self._text}",
                "stmt": self._prefix}[self._kind]
        return f"<Tensor {what} {list(self.shape)} {self.dtype}>"

    def __bool__(self) -> bool:
        raise ArgumentTypeError("a symbolic Tensor has no truth value (use ops.where for a "
                                "choice, and write comparisons one at a time)")

    def __len__(self) -> int:
        if not self.shape:
            raise ArgumentTypeError("len() of a rank-0 Tensor")
        return self.shape[0]

    def __iter__(self):
        raise ArgumentTypeError("a symbolic Tensor is not iterable (index it: x[0])")

    # arithmetic -----------------------------------------------------------------------
    def __add__(self, other: object) -> Tensor:
        return _binary("+", self, other, "add")

    def __radd__(self, other: object) -> Tensor:
        return _binary("+", other, self, "add")

    def __sub__(self, other: object) -> Tensor:
        return _binary("-", self, other, "sub")

    def __rsub__(self, other: object) -> Tensor:
        return _binary("-", other, self, "sub")

    def __mul__(self, other: object) -> Tensor:
        return _binary("*", self, other, "mul")

    def __rmul__(self, other: object) -> Tensor:
        return _binary("*", other, self, "mul")

    def __truediv__(self, other: object) -> Tensor:
        return _binary("/", self, other, "div")

    def __rtruediv__(self, other: object) -> Tensor:
        return _binary("/", other, self, "div")

    def __mod__(self, other: object) -> Tensor:
        return _binary("%", self, other, "mod")

    def __rmod__(self, other: object) -> Tensor:
        return _binary("%", other, self, "mod")

    def __neg__(self) -> Tensor:
        if self.dtype == "bool":
            raise ArgumentError("neg: x is bool (Tile has no negation of bool values)")
        return emit("{O} = -{0}", [self], self.shape, self.dtype, name="Neg")

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return emit("{O} = abs({0})", [self], self.shape, self.dtype, name="Abs")

    def __lt__(self, other: object) -> Tensor:
        return _binary("<", self, other, "less")

    def __le__(self, other: object) -> Tensor:
        return _binary("<=", self, other, "less_equal")

    def __gt__(self, other: object) -> Tensor:
        return _binary(">", self, other, "greater")

    def __ge__(self, other: object) -> Tensor:
        return _binary(">=", self, other, "greater_equal")

    def __and__(self, other: object) -> Tensor:
        return _binary("&", self, other, "bitwise_and")

    def __rand__(self, other: object) -> Tensor:
        return _binary("&", other, self, "bitwise_and")

    def __or__(self, other: object) -> Tensor:
        return _binary("|", self, other, "bitwise_or")

    def __ror__(self, other: object) -> Tensor:
        return _binary("|", other, self, "bitwise_or")

    def __xor__(self, other: object) -> Tensor:
        return _binary("^", self, other, "bitwise_xor")

    def __rxor__(self, other: object) -> Tensor:
        return _binary("^", other, self, "bitwise_xor")

    def __invert__(self) -> Tensor:
        if _dtype_of(self).is_float:
            raise ArgumentError("invert: x must be an integer or bool tensor, got "
                                f"{self.dtype}")
        return emit("{O} = ~{0}", [self], self.shape, self.dtype, name="Not")

    __hash__ = object.__hash__

    def __getitem__(self, key: object) -> Tensor:
        from . import array  # the array ops build on this module

        getitem = getattr(array, "getitem", None)
        if getitem is None:
            raise ArgumentError("Tensor indexing needs ops.getitem, which this build of "
                                "stripe.ops does not have")
        return getitem(self, key)


def _dtype_of(t: Tensor) -> DType:
    """The :class:`~stripe.dtypes.DType` of ``t``."""
    return to_dtype(t.dtype)


# constructors ---------------------------------------------------------------------------

def input(name: str, shape: Sequence[int], dtype: str = "float32") -> Tensor:  # noqa: A001
    """A function input called ``name`` (a Tile tensor name, ``[A-Z][A-Za-z0-9_]*``) of the
    given shape and dtype. Two inputs of one function may not share a name (checked by
    :func:`function`)."""
    _check_name(name, "input: name")
    return Tensor("input", _shape(shape, "input: shape"), _dtype_name(dtype, "input: dtype"),
                  prefix=name)


def _literal_text(value: int | float | bool, what: str) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "bool(1)" if value else "bool(0)"
    if isinstance(value, (int, np.integer)):
        v = int(value)
        if not -2**63 <= v < 2**64:
            raise ArgumentError(f"{what}: {v} does not fit 64 bits")
        return str(v)
    v = float(value)
    if math.isnan(v):
        return "(1e999 - 1e999)"
    if math.isinf(v):
        return "1e999" if v > 0 else "-1e999"
    text = repr(v)
    return text if ("." in text or "e" in text) else text + ".0"


def _is_number(value: object) -> bool:
    return isinstance(value, (numbers.Integral, numbers.Real, np.bool_, bool)) and not \
        isinstance(value, Tensor)


def constant(value: int | float | bool, dtype: str | None = None) -> Tensor:
    """A rank-0 tensor written as a Tile literal.

    Without ``dtype`` it is a *weak* literal (``2``, ``0.5``): it takes the type of what it
    meets, as Tile's literals do (``int8 + 1`` is int8). With ``dtype`` it is converted to
    that type (``float64(0.5)``) and promotes like a tensor of that type. A ``bool`` value is
    ``bool(1)``/``bool(0)``. Infinities and NaN are written as constant expressions Tile folds
    (``1e999``)."""
    if not _is_number(value) or isinstance(value, complex):
        raise ArgumentTypeError(f"constant: value must be an int, float or bool, got "
                                f"{type(value).__name__}")
    text = _literal_text(value, "constant: value")
    if isinstance(value, (bool, np.bool_)):
        value = bool(value)
        if dtype is None:
            return Tensor("literal", (), "bool", prefix="C", text=text, value=value)
        text = "1" if value else "0"
    elif isinstance(value, (int, np.integer)):
        value = int(value)
    else:
        value = float(value)
    if dtype is None:
        return Tensor("literal", (), _own_type(value), prefix="C", weak=True, text=text,
                      value=value)
    name = _dtype_name(dtype, "constant: dtype")
    _check_fits(value, name, "constant", "value")
    return Tensor("literal", (), name, prefix="C", text=f"{name}({text})", value=value)


def _own_type(value: int | float | bool) -> str:
    """The type Tile gives the literal by itself."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float):
        return "float32"
    return "int32" if -2**31 <= value < 2**31 else "int64"


def _check_fits(value: int | float | bool, dtype: str, op: str, arg: str) -> None:
    d = to_dtype(dtype)
    if d is DType.BOOL or isinstance(value, bool):
        return
    if d.is_float:
        return
    if not isinstance(value, int):
        raise ArgumentError(f"{op}: {arg} {value!r} is not an integer but the type is {dtype}")
    info = np.iinfo(d.np)
    if not info.min <= value <= info.max:
        raise ArgumentError(f"{op}: {arg} {value} does not fit {dtype} "
                            f"({info.min}..{info.max})")


def _typed_literal(lit: Tensor, dtype: str, op: str) -> Tensor:
    """The weak literal ``lit`` as a literal of ``dtype``: its plain text (``2``, ``0.5``)
    when Tile's own type for it (int32, int64 or float32) promotes to ``dtype`` next to a
    ``dtype`` operand on either side, else a cast (``int8(2)``, ``float16(0.5)``).
    ArgumentError naming ``op`` when the value does not fit ``dtype``."""
    value = lit._value
    assert value is not None
    _check_fits(value, dtype, op, "the number")
    d = to_dtype(dtype)
    own = to_dtype(_own_type(value))
    if promote(own, d) is d and promote(d, own) is d:
        return Tensor("literal", (), dtype, prefix="C", text=lit._text, value=value)
    text = ("1" if value else "0") if isinstance(value, bool) else _literal_text(value, op)
    return Tensor("literal", (), dtype, prefix="C", text=f"{dtype}({text})", value=value)


def _as_tensor(x: object, op: str, arg: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if _is_number(x) and not isinstance(x, complex):
        return constant(x)  # type: ignore[arg-type]
    raise ArgumentTypeError(f"{op}: {arg} must be a Tensor or a number, got "
                            f"{type(x).__name__}")


# dtype and shape rules ------------------------------------------------------------------

def _weak_kind(t: Tensor) -> str:
    return "float" if isinstance(t._value, float) else "int"


def result_dtype(*operands: Tensor | int | float | bool) -> str:
    """The dtype of an elementwise operation on ``operands`` as the ops write it: Tile's
    promotion of the tensors' types (:func:`stripe.dtypes.promote`, PlaidML's rule, in
    operand order), with Python numbers (and :func:`constant` without a dtype) *weak*, as in
    numpy 2: an integer number takes the tensors' type (``int32`` next to ``bool``), a float
    number takes a float type and makes an integer or bool one ``float32``. The ops write
    such a number as a typed literal (``int8(1)``, ``float16(0.5)``) where Tile's own
    literal type (int32, float32) would widen the result. Only numbers: ``float32`` if any is
    a float, else ``int32`` (``int64`` for a value past int32)."""
    if not operands:
        raise ArgumentError("result_dtype: needs at least one operand")
    ts = [_as_tensor(x, "result_dtype", "operands") for x in operands]
    strong = [t for t in ts if not t._weak]
    weak = [t for t in ts if t._weak]
    if not strong:
        if any(_weak_kind(t) == "float" for t in weak):
            return "float32"
        return "int64" if any(t.dtype == "int64" for t in weak) else "int32"
    d = to_dtype(strong[0].dtype)
    for t in strong[1:]:
        d = promote(d, to_dtype(t.dtype))
    if any(_weak_kind(t) == "float" for t in weak) and not d.is_float:
        return "float32"
    if weak and d is DType.BOOL:
        return "int32"
    return d.long_name


def broadcast_shapes(*shapes: Sequence[int], op: str = "broadcast") -> tuple[int, ...]:
    """numpy broadcasting of ``shapes``; ArgumentError naming ``op`` on a mismatch."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(rank):
        size = 1
        for s in shapes:
            d = s[len(s) - rank + k] if len(s) - rank + k >= 0 else 1
            if d == 1:
                continue
            if size not in (1, d):
                raise ArgumentError(f"{op}: shapes {' and '.join(str(tuple(x)) for x in shapes)}"
                                    f" do not broadcast")
            size = d
        out.append(size)
    return tuple(out)


_COMPARISONS = {"<", ">", "<=", ">=", "==", "!="}
_BITWISE = {"&", "|", "^"}


def _binary(op: str, a: object, b: object, opname: str) -> Tensor:
    x = _as_tensor(a, opname, "x")
    y = _as_tensor(b, opname, "y")
    shape = broadcast_shapes(x.shape, y.shape, op=opname)
    dtype = result_dtype(x, y)
    if op in _BITWISE and (to_dtype(dtype).is_float or isinstance(x._value, float)
                           or isinstance(y._value, float)):
        raise ArgumentError(f"{opname}: operands must be integer or bool tensors, got "
                            f"{x.dtype} and {y.dtype}")
    if op in ("+", "-", "*", "/", "%") and x.dtype == "bool" and y.dtype == "bool" \
            and not (x._weak or y._weak):
        raise ArgumentError(f"{opname}: arithmetic on two bool tensors (cast one with "
                            f"ops.cast first)")
    if x._weak and y._weak:
        return _fold(op, x, y, opname)
    if x._weak:
        x = _typed_literal(x, dtype, opname)
    if y._weak:
        y = _typed_literal(y, dtype, opname)
    if op in _COMPARISONS:
        dtype = "bool"
    return emit(f"{{O}} = {{0}} {op} {{1}}", [x, y], shape, dtype,
                name=opname.title().replace("_", ""))


def _fold(op: str, x: Tensor, y: Tensor, opname: str) -> Tensor:
    """Two weak literals: the result as a weak literal, with Tile's arithmetic (integer
    ``/`` truncates, ``%`` takes the dividend's sign)."""
    a, b = x._value, y._value
    assert a is not None and b is not None
    both_int = isinstance(a, int) and isinstance(b, int)
    if op in ("/", "%") and b == 0:
        raise ArgumentError(f"{opname}: division of two numbers by zero")
    if op == "+":
        v: int | float | bool = a + b
    elif op == "-":
        v = a - b
    elif op == "*":
        v = a * b
    elif op == "/" and both_int:
        q = abs(a) // abs(b)
        v = q if (a < 0) == (b < 0) else -q
    elif op == "/":
        v = a / b
    elif op == "%" and both_int:
        v = abs(a) % abs(b) if a >= 0 else -(abs(a) % abs(b))
    elif op == "%":
        v = math.fmod(a, b)
    elif op in _COMPARISONS:
        v = {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b, "==": a == b,
             "!=": a != b}[op]
        return constant(bool(v))
    else:
        v = {"&": a & b, "|": a | b, "^": a ^ b}[op]  # type: ignore[operator]
    return constant(v)


def equal(x: Tensor | int | float | bool, y: Tensor | int | float | bool) -> Tensor:
    """Elementwise ``x == y`` (a bool tensor, numpy broadcasting): ``O = X == Y;``."""
    return _binary("==", x, y, "equal")


def not_equal(x: Tensor | int | float | bool, y: Tensor | int | float | bool) -> Tensor:
    """Elementwise ``x != y`` (a bool tensor, numpy broadcasting): ``O = X != Y;``."""
    return _binary("!=", x, y, "not_equal")


# emit -----------------------------------------------------------------------------------

def emit(statement: str, operands: Sequence[Tensor], shape: Sequence[int], dtype: str, *,
         name: str = "T") -> Tensor:
    """The primitive every op uses: a new tensor computed by one Tile statement.

    ``statement`` is one Tile statement (a final ``;`` is optional) in which ``{O}`` stands
    for the new tensor's name and ``{0}``, ``{1}``, ... for the operands' names, e.g.
    ``emit("{O}[i, j : 3, 4] = +({0}[i, k] * {1}[k, j])", [a, b], (3, 4), "float32",
    name="MatMul")``. ``name`` is a readable prefix (:func:`function` makes it unique:
    ``MatMul``, ``MatMul_1``, ...). ``shape`` and ``dtype`` must be what the statement
    produces: they are not checked against Tile here (lowering checks the statement)."""
    if not isinstance(statement, str):
        raise ArgumentTypeError(f"emit: statement must be a str, got "
                                f"{type(statement).__name__}")
    if isinstance(operands, Tensor) or not isinstance(operands, Sequence):
        raise ArgumentTypeError(f"emit: operands must be a sequence of Tensors, got "
                                f"{type(operands).__name__}")
    for k, t in enumerate(operands):
        if not isinstance(t, Tensor):
            raise ArgumentTypeError(f"emit: operands[{k}] must be a Tensor, got "
                                    f"{type(t).__name__}")
    _check_name(name, "emit: name")
    text = statement.strip()
    if text.endswith(";"):
        text = text[:-1].rstrip()
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
    except ValueError as e:
        raise ArgumentError(f"emit: statement: {e}") from None
    used = set()
    for f in fields:
        if f != "O" and not (f.isdigit() and int(f) < len(operands)):
            raise ArgumentError(f"emit: statement has the field {{{f}}}; only {{O}} and "
                                f"{{0}}..{{{len(operands) - 1}}} are allowed")
        used.add(f)
    if "O" not in used or ";" in text:
        raise ArgumentError("emit: statement must be one Tile statement that assigns {O}")
    missing = [k for k in range(len(operands)) if str(k) not in used]
    if missing:
        raise ArgumentError(f"emit: operand {missing[0]} is not used by the statement")
    return Tensor("stmt", _shape(shape, "emit: shape"), _dtype_name(dtype, "emit: dtype"),
                  prefix=name, template=text, operands=tuple(operands))


# function -------------------------------------------------------------------------------

def _rhs(t: Tensor) -> str | None:
    """The right-hand side template of an elementwise statement (None for the others)."""
    if t._kind != "stmt":
        return None
    m = _ELEMENTWISE.match(t._template)
    if m is None or _SPECIAL_RHS.match(m.group(1)) or "{O}" in m.group(1):
        return None
    return m.group(1)


def _value_position(template: str, start: int) -> bool:
    """Whether the placeholder at ``start`` of an elementwise template is a value (not a
    tensor argument that must be a name)."""
    return _NAME_ARG.search(template, 0, start) is None


_TOKEN = re.compile(r"\s*(?:(?P<num>[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?"
                    r"|[0-9]+(?:[eE][-+]?[0-9]+)?)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
                    r"|(?P<op>\|\||&&|==|!=|<=|>=|<<|>>|[-+*/%<>|^&!~?:(),=\[\]{}]))")
_PREC = {"?": 1, ":": 1, "||": 2, "&&": 3, "|": 4, "^": 5, "&": 6, "==": 7, "!=": 7,
         "<": 8, ">": 8, "<=": 8, ">=": 8, "<<": 9, ">>": 9, "+": 10, "-": 10, "*": 11,
         "/": 11, "%": 11}
_UNARY = 12
_ATOMIC = 13
_CHAINLESS = {7, 8}  # comparisons do not chain


def _tokens(text: str) -> list[tuple[str, str]]:
    """``(kind, text)`` tokens of an expression; kind is num, name, op or unary."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip() == "":
                break
            out.append(("other", text[pos]))
            pos += 1
            continue
        pos = m.end()
        kind = m.lastgroup or "other"
        tok = m.group(kind)
        if kind == "op" and tok in "-!~" and (not out or (out[-1][0] in ("op", "unary") and
                                                           out[-1][1] not in ")]}")):
            kind = "unary"
        out.append((kind, tok))
    return out


def _precedence(text: str) -> int:
    """The precedence of the loosest operator of ``text`` outside parentheses."""
    depth = 0
    prec = _ATOMIC
    for kind, tok in _tokens(text):
        if tok in "([{" and kind == "op":
            depth += 1
        elif tok in ")]}" and kind == "op":
            depth -= 1
        elif depth == 0 and kind == "op" and tok in _PREC:
            prec = min(prec, _PREC[tok])
        elif depth == 0 and kind == "unary":
            prec = min(prec, _UNARY)
        elif kind == "other":
            return 0
    return prec


def _needs_parens(template: str, start: int, end: int, prec: int) -> bool:
    """Whether an expression of precedence ``prec`` put at ``template[start:end]`` needs
    parentheses to keep its meaning (Tile's precedence table, left-associative binary
    operators)."""
    if prec == 0:
        return True
    if prec == _ATOMIC:
        return False
    left = _tokens(template[:start])
    right = _tokens("X" + template[end:])[1:]  # "X": the next operator is binary
    lk, lt = left[-1] if left else ("op", "(")
    rk, rt = right[0] if right else ("op", ")")
    if lk == "unary":
        return True
    if lk == "op" and lt in _PREC:
        lp = _PREC[lt]
        if prec <= lp or lp == 1:
            return prec <= lp
    elif not (lk == "op" and lt in "(,="):
        return True
    if rk == "op" and rt in _PREC:
        rp = _PREC[rt]
        if prec < rp or (prec == rp and prec in _CHAINLESS) or rp == 1 and prec == 1:
            return True
    elif not (rk == "op" and rt in "),"):
        return True
    return False


class Function:
    """A Tile function built from :class:`Tensor` outputs by :func:`function`.

    ``source`` (also ``tile_source`` and ``str(fn)``) is the Tile text; ``tile_inputs`` maps
    each input name to ``(shape, dtype)``; ``tile_outputs`` the same for the outputs;
    ``inputs`` and ``outputs`` are the names in order. ``stripe.lower(fn)`` and
    ``stripe.compile(fn, target=...)`` accept it directly."""

    def __init__(self, source: str, inputs: dict[str, tuple[tuple[int, ...], str]],
                 outputs: dict[str, tuple[tuple[int, ...], str]], name: str | None) -> None:
        self.source = source
        self.tile_source = source
        self.tile_inputs = inputs
        self.tile_outputs = outputs
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.name = name

    def __str__(self) -> str:
        return self.source

    def __repr__(self) -> str:
        name = f" {self.name}" if self.name else ""
        return (f"<stripe.ops.Function{name}({', '.join(self.inputs)}) -> "
                f"({', '.join(self.outputs)})>")


def _outputs(outputs: object) -> list[tuple[str, Tensor]]:
    if isinstance(outputs, Tensor):
        return [("O", outputs)]
    if isinstance(outputs, Mapping):
        pairs = []
        for k, v in outputs.items():
            _check_name(k, "function: outputs key")
            if not isinstance(v, Tensor):
                raise ArgumentTypeError(f"function: outputs[{k!r}] must be a Tensor, got "
                                        f"{type(v).__name__}")
            pairs.append((k, v))
        return pairs
    if isinstance(outputs, Sequence) and not isinstance(outputs, (str, bytes)):
        pairs = []
        for k, v in enumerate(outputs):
            if not isinstance(v, Tensor):
                raise ArgumentTypeError(f"function: outputs[{k}] must be a Tensor, got "
                                        f"{type(v).__name__}")
            pairs.append(("O" if k == 0 else f"O_{k}", v))
        return pairs
    raise ArgumentTypeError(f"function: outputs must be a Tensor, a sequence of Tensors or a "
                            f"mapping from name to Tensor, got {type(outputs).__name__}")


def function(outputs: Mapping[str, Tensor] | Sequence[Tensor] | Tensor, *,
             name: str | None = None) -> Function:
    """The Tile function computing ``outputs`` from the inputs they depend on.

    ``outputs``: a mapping from output name to Tensor, a sequence (named ``O``, ``O_1``, ...)
    or one Tensor (named ``O``). Statements come in the order their tensors were created,
    inputs in the order of their :func:`input` calls. An output that is an input, a constant,
    or a tensor already returned under another name is written as a copy (``Y = X;``).
    Raises ArgumentError when two different inputs share a name, an output name repeats or
    is an input's name, or there are no outputs."""
    if name is not None and not isinstance(name, str):
        raise ArgumentTypeError(f"function: name must be a str, got {type(name).__name__}")
    pairs = _outputs(outputs)
    if not pairs:
        raise ArgumentError("function: outputs is empty")
    out_names = [k for k, _ in pairs]
    if len(set(out_names)) != len(out_names):
        dup = next(k for k in out_names if out_names.count(k) > 1)
        raise ArgumentError(f"function: output name {dup!r} is given twice")

    # every tensor the outputs depend on
    seen: dict[int, Tensor] = {}
    stack = [t for _, t in pairs]
    while stack:
        t = stack.pop()
        if t._order in seen:
            continue
        seen[t._order] = t
        stack.extend(t._operands)
    tensors = sorted(seen.values(), key=lambda t: t._order)
    inputs = [t for t in tensors if t._kind == "input"]
    by_name: dict[str, Tensor] = {}
    for t in inputs:
        if t._prefix in by_name:
            raise ArgumentError(f"function: two different inputs are named {t._prefix!r}")
        by_name[t._prefix] = t
    for k in out_names:
        if k in by_name:
            raise ArgumentError(f"function: output name {k!r} is also an input's name")

    # uses: how often each tensor appears in the statements and outputs
    uses: dict[int, int] = {}
    sole_use_ok: dict[int, bool] = {}
    named_literals: set[int] = set()
    for t in tensors:
        if t._kind != "stmt":
            continue
        rhs_start = _rhs_start(t)
        for m in _PLACEHOLDER.finditer(t._template):
            if m.group(1) == "O":
                continue
            op = t._operands[int(m.group(1))]
            uses[op._order] = uses.get(op._order, 0) + 1
            ok = rhs_start is not None and m.start() >= rhs_start and \
                _value_position(t._template, m.start())
            sole_use_ok[op._order] = ok
            if op._kind == "literal" and not ok:
                named_literals.add(op._order)
    first_output: dict[int, str] = {}
    for k, t in pairs:
        first_output.setdefault(t._order, k)
    inline = {t._order for t in tensors
              if _rhs(t) is not None and t._order not in first_output
              and uses.get(t._order, 0) == 1 and sole_use_ok.get(t._order, False)}

    # names
    taken = set(by_name) | set(out_names)
    names: dict[int, str] = {}
    counters: dict[str, int] = {}
    for t in tensors:
        if t._kind == "input":
            names[t._order] = t._prefix
        elif t._order in first_output and t._kind == "stmt":
            names[t._order] = first_output[t._order]
        elif t._order in inline or (t._kind == "literal" and t._order not in named_literals):
            continue
        else:
            base = t._prefix
            n = counters.get(base, 0)
            cand = base if n == 0 else f"{base}_{n}"
            while cand in taken:
                n += 1
                cand = f"{base}_{n}"
            counters[base] = n + 1
            taken.add(cand)
            names[t._order] = cand

    # literals used in a contraction (or as a tensor argument) get a statement of their own
    lines: list[str] = []
    rendered: dict[int, tuple[str, int]] = {}  # inlined: (text, precedence)
    for t in tensors:
        if t._kind == "literal" and t._order in names:
            lines.append(f"{names[t._order]} = {t._text};")
        if t._kind != "stmt":
            continue
        text, prec = _render(t, names, rendered, inline)
        if t._order in inline:
            rendered[t._order] = (text, prec)
        else:
            lines.append(text + ";")

    # outputs that are inputs, constants, or named twice
    for k, t in pairs:
        if t._kind == "stmt" and first_output[t._order] == k:
            continue
        if t._kind == "literal":
            lines.append(f"{k} = {t._text};")
        else:
            lines.append(f"{k} = {names[t._order]};")

    decls = ", ".join(f"{t._prefix}[{', '.join(str(s) for s in t.shape)}]" for t in inputs)
    body = "".join(f"    {line}\n" for line in lines)
    source = f"function ({decls}) -> ({', '.join(out_names)}) {{\n{body}}}\n"
    return Function(source, {t._prefix: (t.shape, t.dtype) for t in inputs},
                    {k: (t.shape, t.dtype) for k, t in pairs}, name)


def _rhs_start(t: Tensor) -> int | None:
    m = _ELEMENTWISE.match(t._template)
    if m is None or _rhs(t) is None:
        return None
    return m.start(1)


def _render(t: Tensor, names: dict[int, str], rendered: dict[int, tuple[str, int]],
            inline: set[int]) -> tuple[str, int]:
    """The statement of ``t`` with its placeholders replaced (``rendered`` holds the text and
    precedence of inlined operands; for an inlined ``t`` only the right-hand side), and the
    precedence of the right-hand side. The precedence is the template's (placeholders count
    as atoms: an operand is either parenthesised or binds at least as tightly as the
    operator next to it), or the operand's when the template is one placeholder; so each
    expression is scanned once, however deep the inlining."""
    template = t._template
    rhs_start = _rhs_start(t)
    if rhs_start is not None and t._order in inline:
        template = template[rhs_start:]
        rhs_start = 0
    only = _PLACEHOLDER.fullmatch(template.strip())
    prec = _precedence(_PLACEHOLDER.sub("X", template)) if rhs_start == 0 else 0

    def sub(m: re.Match[str]) -> str:
        nonlocal prec
        f = m.group(1)
        if f == "O":
            return names[t._order]
        op = t._operands[int(f)]
        if op._order in rendered:
            text, inner = rendered[op._order]
        elif op._kind == "literal" and rhs_start is not None and m.start() >= rhs_start \
                and _value_position(template, m.start()):
            text = op._text  # a number written where it is a value
            inner = _precedence(text)
        else:
            return names[op._order]
        if _needs_parens(template, m.start(), m.end(), inner):
            return f"({text})"
        if only:
            prec = inner
        return text

    return _PLACEHOLDER.sub(sub, template), prec


def gradient(y: Tensor, wrt: Tensor | Sequence[Tensor], *, name: str = "Y") -> Function:
    """The gradient function of ``y`` with respect to the inputs ``wrt``
    (:func:`stripe.gradient`, docs/gradients.md).

    The result is a :class:`Function` whose inputs are those of ``function({name: y})`` plus
    ``<name>_grad`` (the cotangent: ``y``'s shape and dtype), and whose outputs are
    ``<X>_grad`` for each input ``X`` in ``wrt`` (``X``'s shape and dtype): the
    vector-Jacobian product. ``y`` and every ``wrt`` must have a float type; each ``wrt``
    must be an input that ``y`` depends on (ArgumentError naming the argument otherwise)."""
    from ..gradient import gradient as _gradient  # the op library builds on the front end

    if not isinstance(y, Tensor):
        raise ArgumentTypeError(f"gradient: y must be a Tensor, got {type(y).__name__}")
    ws = [wrt] if isinstance(wrt, Tensor) else wrt
    if isinstance(ws, (str, bytes)) or not isinstance(ws, Sequence) or not ws:
        raise ArgumentTypeError("gradient: wrt must be an input Tensor or a non-empty sequence "
                                "of them")
    _check_name(name, "gradient: name")
    fn = function({name: y})
    names = []
    for k, t in enumerate(ws):
        if not isinstance(t, Tensor):
            raise ArgumentTypeError(f"gradient: wrt[{k}] must be a Tensor, got "
                                    f"{type(t).__name__}")
        if t._kind != "input":
            raise ArgumentError(f"gradient: wrt[{k}] is not an input (ops.input): gradients "
                                f"are taken with respect to inputs")
        if fn.tile_inputs.get(t._prefix) != (t.shape, t.dtype):
            raise ArgumentError(f"gradient: y does not depend on the input {t._prefix}")
        if not to_dtype(t.dtype).is_float:
            raise ArgumentError(f"gradient: the input {t._prefix} is {t.dtype}: only float "
                                f"inputs have a gradient")
        names.append(t._prefix)
    if not to_dtype(y.dtype).is_float:
        raise ArgumentError(f"gradient: y is {y.dtype}: only float values can be "
                            f"differentiated")
    text = _gradient(fn, wrt=names, of=name, inputs=fn.tile_inputs)
    inputs = {**fn.tile_inputs, f"{name}_grad": (y.shape, y.dtype)}
    outputs = {f"{n}_grad": fn.tile_inputs[n] for n in names}
    return Function(text, inputs, outputs, f"{name}_gradient")
