"""PlaidML's builtin Tile functions, rewritten into plain Tile before typing.

``expand(fn, inputs)`` takes a parsed function and returns one in which every builtin call
has become constructs the lowering already knows (operators, intrinsics, contractions,
``index``), following PlaidML 0.7's definitions (``tile/lang/builtins.cc``, ``type.cc`` and the
parser's operator names). See ``docs/tile_builtins.md`` for the table of every function.

* Call forms of operators: ``add(a, b)`` is ``a + b``, ``cmp_lt(a, b)`` is ``a < b``,
  ``neg(x)`` is ``-x``, ``cond(c, a, b)`` is ``c ? a : b``, ``ident(x)`` is ``x``, ...
* Elementwise definitions: ``sigmoid``, ``relu``, ``recip``, ``reverse_grad``,
  ``builtin_binary_crossentropy``.
* Multi-statement definitions (``builtin_softmax``, ``builtin_logsoftmax``, ``shape``,
  ``simple_reduce``): their statements are inserted before the statement that calls them,
  writing temporaries with fresh names (``Softmax_M_1``, ...) that no name of the function
  uses; the call becomes the final expression. When the call is the whole right-hand side,
  the last generated statement writes the statement's own tensor. The inserted statements
  carry the attributes (``[[pid(...)]]``) of the statement they are made for.
* Refused with a located ``TileError`` naming the function: ``prng_*``, ``tuple``,
  ``element``, ``quantize`` (see the doc for why). ``broadcast`` and ``match`` (bind-time
  size functions) are left to the lowering.

Every generated node carries the position of the call it comes from, so later errors point
at the call. The rewrite is one post-order pass over each expression (iterative, any depth):
linear in the size of the function, deterministic, and the identity (the same object) when no
builtin occurs. Unknown functions are left alone (the type checker reports them).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Union

from ..errors import TileError
from ..limits import check_depth
from . import ast as A

# call forms of PlaidML's operators (its parser turns `a + b` into add(a, b))
BINARY_CALLS = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%",
    "cmp_eq": "==", "cmp_ne": "!=", "cmp_lt": "<", "cmp_gt": ">", "cmp_le": "<=", "cmp_ge": ">=",
    "bit_and": "&", "bit_or": "|", "bit_xor": "^", "bit_left": "<<", "bit_right": ">>",
}
UNARY_CALLS = {"neg": "-", "bit_not": "~"}

_REFUSED = {
    "prng_step": "PlaidML's random number generator (prng_step, prng_state, prng_value) is not "
                 "supported: a program here is a deterministic function of its inputs; pass "
                 "random values as an input",
    "tuple": "tuple values (tuple, element) are not supported: name each tensor instead",
    "quantize": "quantize is not supported: convert with as_int(x, 8) after scaling",
}
_REFUSED["prng_state"] = _REFUSED["prng_value"] = _REFUSED["prng_step"]
_REFUSED["element"] = _REFUSED["tuple"]

_SPECIALS = ("reshape", "gather", "scatter")  # their tensor arguments must be names

_ARITY = {
    **{name: 2 for name in BINARY_CALLS}, **{name: 1 for name in UNARY_CALLS},
    "cond": 3, "ident": 1, "recip": 1, "reverse_grad": 2, "sigmoid": 1, "relu": 1,
    "builtin_binary_crossentropy": 3, "builtin_softmax": 3, "builtin_logsoftmax": 3,
    "shape": 1,
}
BUILTINS = frozenset((*_ARITY, "simple_reduce", *_REFUSED))
"""The function names ``expand`` rewrites or refuses."""

# an argument used more than once is copied when it has at most this many nodes, and
# computed once into a temporary otherwise (so that nested builtins stay linear)
_COPY_LIMIT = 8

Node = Union[A.Expr, A.Poly]
# a tensor's sizes: per dimension, the integer expressions it may have, by their text (several
# when operands broadcast: they are then equal or 1); an empty mapping is the size 1
Sizes = tuple[dict[str, A.Expr], ...]
Stmt = Union[A.Contraction, A.Assign]


def is_builtin(fn: str) -> bool:
    """True when ``fn`` is a function name ``expand`` rewrites or refuses."""
    return fn in BUILTINS


def expand(fn: A.Function, inputs: Mapping[str, object] | None = None, *,
           keep: Collection[str] = ()) -> A.Function:
    """``fn`` with every builtin call rewritten into plain Tile (module docstring).

    ``inputs`` (the mapping given to ``lower``) is read only for the ranks of inputs declared
    without dimensions, when the function calls ``shape`` or ``simple_reduce``; malformed
    entries are ignored (the binder reports them). Raises ``TileError`` at the call for a
    wrong number of arguments, a refused function, or an argument of the wrong kind.

    Calls of the builtins named in ``keep`` (``reverse_grad``, say, for a caller that gives
    it a gradient) are left as they are, after checking their number of arguments."""
    if not any(_has_builtin(s) for s in fn.stmts):
        return fn
    return _Expander(fn, inputs, frozenset(keep)).run()


# ---------------------------------------------------------------------------------------------

def _has_builtin(stmt: Stmt) -> bool:
    if not isinstance(stmt, A.Assign):
        return False
    stack: list[A.Expr] = [stmt.expr]
    while stack:
        node = stack.pop()
        if isinstance(node, A.Call) and is_builtin(node.fn):
            return True
        stack.extend(child for child, _ in A.children(node))  # type: ignore[misc]
    return False


def _kids(node: A.Expr) -> tuple[A.Expr, ...]:
    if isinstance(node, A.Binary):
        return (node.a, node.b)
    if isinstance(node, A.Ternary):
        return (node.cond, node.a, node.b)
    if isinstance(node, A.Unary):
        return (node.x,)
    if isinstance(node, A.Call):
        return node.args
    return ()


def _rebuild(node: A.Expr, kids: Sequence[A.Expr]) -> A.Expr:
    if isinstance(node, A.Binary):
        return replace(node, a=kids[0], b=kids[1])
    if isinstance(node, A.Ternary):
        return replace(node, cond=kids[0], a=kids[1], b=kids[2])
    if isinstance(node, A.Unary):
        return replace(node, x=kids[0])
    if isinstance(node, A.Call):
        return replace(node, args=tuple(kids))
    return node


def _small(node: A.Expr) -> bool:
    """At most ``_COPY_LIMIT`` nodes (stops counting past the limit)."""
    count, stack = 0, [node]
    while stack:
        count += 1
        if count > _COPY_LIMIT:
            return False
        stack.extend(_kids(stack.pop()))
    return True


def _input_rank(value: object) -> int | None:
    """The rank of an ``inputs`` entry (array or ``(shape, dtype)``), None if unclear."""
    if isinstance(value, (int, float)):  # a rank-0 input given as a Python number
        return 0
    try:
        shape = getattr(value, "shape", None)
        if shape is None and isinstance(value, (tuple, list)) and len(value) == 2:
            shape = value[0]
        if isinstance(shape, int):
            return 1
        return len(shape) if shape is not None else None  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - the binder reports malformed inputs
        return None


# Tile text of generated statements ----------------------------------------------------------

def _parts(node: object) -> list[object]:
    if isinstance(node, (A.Num, A.PolyNum)):
        return [repr(node.value)]
    if isinstance(node, (A.Name, A.PolyName)):
        return [node.name]
    if isinstance(node, (A.Unary, A.PolyNeg)):
        return [getattr(node, "op", "-"), "(", node.x, ")"]
    if isinstance(node, (A.Binary, A.PolyBin)):
        return ["(", node.a, f" {node.op} ", node.b, ")"]
    if isinstance(node, A.Ternary):
        return ["(", node.cond, " ? ", node.a, " : ", node.b, ")"]
    if isinstance(node, (A.Call, A.PolyCall)):
        out: list[object] = [node.fn, "("]
        for k, arg in enumerate(node.args):
            out += [", ", _Bare(arg)] if k else [_Bare(arg)]
        return [*out, ")"]
    if isinstance(node, _Bare):
        parts = _parts(node.node)
        return parts[1:-1] if isinstance(node.node, (A.Binary, A.PolyBin, A.Ternary)) else parts
    return [str(node)]


class _Bare:
    """A node printed without its outer parentheses (a call argument, a whole statement)."""

    def __init__(self, node: object) -> None:
        self.node = node


def _text(node: object) -> str:
    """Tile text of an expression or polynomial (iterative: any depth)."""
    parts = _parts(_Bare(node))
    out: list[str] = []
    stack = list(reversed(parts))
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        else:
            stack.extend(reversed(_parts(item)))
    return "".join(out)


def _ref_text(ref: A.TensorRef) -> str:
    return f"{ref.name}[{', '.join(_text(p) for p in ref.idxs)}]"


def _contraction_text(c: A.Contraction) -> str:
    idxs = ", ".join(_text(p) for p in c.out.idxs)
    sizes = ", ".join(_text(p) for p in c.sizes or ())
    comb = {None: "", "*": " * ", "+": " + "}.get(c.comb, "")
    ins = comb.join(_ref_text(r) for r in c.inputs) if c.comb != "?" else (
        f"{_ref_text(c.inputs[0])} == {_ref_text(c.inputs[1])} ? {_ref_text(c.inputs[2])}")
    head = f"{idxs} : {sizes}" if idxs or sizes else ""
    text = f"{c.out.name}[{head}] = {c.agg}({ins})"
    for k in c.constraints:
        text += f", {_text(k.poly)} < {_text(k.bound)}"
    return text


# ---------------------------------------------------------------------------------------------

class _Expander:
    def __init__(self, fn: A.Function, inputs: Mapping[str, object] | None,
                 keep: frozenset[str]) -> None:
        self.fn = fn
        self.keep = keep
        self.inputs = inputs
        self.taken: set[str] | None = None  # every name of the function, on first need
        self.counter = 0
        self.fresh: set[str] = set()
        self.shapes: dict[str, Sizes | None] = {}  # by tensor; None when the rank is unknown
        self.consts: dict[str, int] = {}  # integer constant statements with a literal value
        self.dims: set[str] = set()
        self.params = list(fn.params)
        self.out: list[Stmt] = []
        sized = any(_calls(s) & {"shape", "simple_reduce"} for s in fn.stmts)
        for k, p in enumerate(fn.params):
            dims = p.dims
            if dims is None:
                rank = _input_rank(inputs.get(p.name)) if isinstance(inputs, Mapping) else None
                if rank is None or (rank and not sized):
                    self.shapes[p.name] = None
                    continue
                if rank:  # name its sizes, for shape() and simple_reduce()
                    dims = tuple(A.PolyName(self._fresh(f"{p.name}_D"), p.pos)
                                 for _ in range(rank))
                    self.params[k] = replace(p, dims=dims)
                else:
                    dims = ()  # a rank-0 input keeps its declaration (it may be an integer)
            self.shapes[p.name] = tuple(self._one(_poly_expr(d)) for d in dims)
            self.dims.update(d.name for d in dims if isinstance(d, A.PolyName))

    # driver -----------------------------------------------------------------------------------
    def run(self) -> A.Function:
        for stmt in self.fn.stmts:
            if isinstance(stmt, A.Assign) and _has_builtin(stmt):
                self._assign(stmt)
            else:
                self._emit(stmt)
        return replace(self.fn, params=tuple(self.params), stmts=tuple(self.out))

    def _emit(self, stmt: Stmt) -> None:
        self.out.append(stmt)
        if isinstance(stmt, A.Contraction):
            sizes = stmt.sizes
            self.shapes[stmt.out.name] = (None if sizes is None else
                                          tuple(self._one(_poly_expr(p)) for p in sizes))
        else:
            self.shapes[stmt.name] = self._shape(stmt.expr)
            value = _int_value(stmt.expr, self.consts)
            if value is not None:
                self.consts[stmt.name] = value

    def _one(self, size: A.Expr) -> dict[str, A.Expr]:
        """A dimension of one known size (the size 1, also through constant statements such
        as ``X_T0 = 1;``, is the empty mapping)."""
        if _int_value(size, self.consts) == 1:
            return {}
        return {_text(size): size}

    def _assign(self, stmt: A.Assign) -> None:
        root = stmt.expr
        start = len(self.out)
        expr = self._rewrite(root)
        if stmt.attrs:  # the statements made for this one carry its attributes
            for k in range(start, len(self.out)):
                self.out[k] = replace(self.out[k], attrs=stmt.attrs)
        last = self.out[-1] if len(self.out) > start else None
        if (isinstance(expr, A.Name) and expr.name in self.fresh and last is not None
                and _output(last) == expr.name):
            # the builtin was the whole right-hand side: its last statement writes stmt.name
            self.out.pop()
            self._emit(_renamed(last, stmt))
            return
        _check_depths(expr)
        self._emit(replace(stmt, expr=expr))

    # expressions ------------------------------------------------------------------------------
    def _rewrite(self, root: A.Expr) -> A.Expr:
        """Post-order rewrite: children first (their statements first), then the node."""
        stack: list[tuple[A.Expr, bool]] = [(root, False)]
        done: list[A.Expr] = []
        while stack:
            node, visited = stack.pop()
            kids = _kids(node)
            if not visited:
                stack.append((node, True))
                stack.extend((k, False) for k in reversed(kids))
                continue
            if kids:
                new = done[len(done) - len(kids):]
                del done[len(done) - len(kids):]
                if any(a is not b for a, b in zip(new, kids)):
                    if isinstance(node, A.Call) and node.fn in _SPECIALS:
                        new = self._special_args(node, new)
                    node = _rebuild(node, new)
            if isinstance(node, A.Call) and is_builtin(node.fn):
                node = self._call(node)
            done.append(node)
        (result,) = done
        return result

    def _call(self, e: A.Call) -> A.Expr:
        fn, args, pos = e.fn, e.args, e.pos
        if fn in _REFUSED:
            raise TileError(f"{fn}: {_REFUSED[fn]}", pos.line, pos.column)
        if fn == "simple_reduce":
            if not args:
                raise TileError("simple_reduce takes a tensor and the sizes to reduce it to",
                                pos.line, pos.column)
            return self._simple_reduce(e)
        n = _ARITY[fn]
        if len(args) != n:
            plural = "argument" if n == 1 else "arguments"
            raise TileError(f"{fn} takes {n} {plural}, got {len(args)}", pos.line, pos.column)
        if fn in self.keep:
            return e
        if fn in BINARY_CALLS:
            return A.Binary(BINARY_CALLS[fn], args[0], args[1], pos)
        if fn in UNARY_CALLS:
            return A.Unary(UNARY_CALLS[fn], args[0], pos)
        if fn == "cond":
            return A.Ternary(args[0], args[1], args[2], pos)
        if fn in ("ident", "reverse_grad"):
            return args[0]
        if fn == "recip":
            return A.Binary("/", A.Num(1, pos), args[0], pos)
        if fn == "sigmoid":  # 1.0 / (1.0 + exp(-x))
            one = A.Num(1.0, pos)
            return A.Binary("/", one, A.Binary(
                "+", one, A.Call("exp", (A.Unary("-", args[0], pos),), pos), pos), pos)
        if fn == "relu":  # x < 0.0 ? 0.0 : x (NaN stays NaN)
            x, zero = self._reusable(args[0], pos), A.Num(0.0, pos)
            return A.Ternary(A.Binary("<", x, zero, pos), zero, x, pos)
        if fn == "builtin_binary_crossentropy":  # -T*log(O) - (1-T)*log(1-O); arg 3 unused
            o, t = self._reusable(args[0], pos), self._reusable(args[1], pos)
            one = A.Num(1, pos)

            def log(x: A.Expr) -> A.Expr:
                return A.Call("log", (x,), pos)
            return A.Binary(
                "-", A.Binary("*", A.Unary("-", t, pos), log(o), pos),
                A.Binary("*", A.Binary("-", one, t, pos),
                         log(A.Binary("-", one, o, pos)), pos), pos)
        if fn in ("builtin_softmax", "builtin_logsoftmax"):
            return self._softmax(e, log=fn == "builtin_logsoftmax")
        return self._shape_of(e)

    def _special_args(self, e: A.Call, args: list[A.Expr]) -> list[A.Expr]:
        """``reshape``/``gather``/``scatter`` take tensor names: an expanded builtin among
        their tensor arguments is computed into a temporary first."""
        count = 1 if e.fn == "reshape" else len(args)
        return [self._hoist(new, "Arg", e.pos)
                if k < count and new is not old and not isinstance(new, A.Name) else new
                for k, (old, new) in enumerate(zip(e.args, args))]

    def _reusable(self, arg: A.Expr, pos: A.Pos) -> A.Expr:
        """``arg`` itself when small, else a temporary holding it (for arguments used twice)."""
        if _small(arg):
            return arg
        return self._hoist(arg, "Arg", pos)

    def _hoist(self, expr: A.Expr, base: str, pos: A.Pos) -> A.Name:
        name = self._fresh(base)
        _check_depths(expr)
        self._emit(A.Assign(name, expr, pos, f"{name} = {_text(expr)}"))
        return A.Name(name, pos)

    def _tensor(self, e: A.Call, k: int) -> A.Name:
        """Argument ``k`` as a tensor name (an expression is computed into a temporary)."""
        arg = e.args[k]
        if isinstance(arg, A.Name):
            return arg
        return self._hoist(arg, "Arg", e.pos)

    # multi-statement builtins ---------------------------------------------------------------
    def _softmax(self, e: A.Call, *, log: bool) -> A.Expr:
        """PlaidML's definition (X of rank 2, S its first size; the third argument unused):
        ``M[i, 0 : S, 1] = >(X[i, j]); E = exp(X - M); N[i, 0 : S, 1] = +(E[i, j]);``
        then ``E / N`` (softmax) or ``X - (M + log(N))`` (log-softmax)."""
        pos = e.pos
        x = self._tensor(e, 0)
        shape = self._shape(x)
        rank = None if shape is None else len(shape)
        if rank is not None and rank != 2:
            raise TileError(f"{e.fn}: its first argument must have rank 2 (rows to normalise), "
                            f"{x.name} has rank {rank}", pos.line, pos.column)
        rows = self._size_arg(e, 1)
        prefix = "LogSoftmax" if log else "Softmax"
        m, ex, n = (self._fresh(f"{prefix}_{s}") for s in "MEN")
        i, j = A.PolyName("i", pos), A.PolyName("j", pos)
        keep = (i, A.PolyNum(0, pos))
        sizes = (rows, A.PolyNum(1, pos))
        self._emit(_contraction(m, keep, sizes, ">", A.TensorRef(x.name, (i, j), pos), pos))
        diff = A.Binary("-", x, A.Name(m, pos), pos)
        self._emit(_assign(ex, A.Call("exp", (diff,), pos), pos))
        self._emit(_contraction(n, keep, sizes, "+", A.TensorRef(ex, (i, j), pos), pos))
        if log:
            total = A.Binary("+", A.Name(m, pos), A.Call("log", (A.Name(n, pos),), pos), pos)
            return A.Binary("-", x, total, pos)
        return A.Binary("/", A.Name(ex, pos), A.Name(n, pos), pos)

    def _shape_of(self, e: A.Call) -> A.Expr:
        """``shape(X)``: a 1-D int32 tensor of X's sizes, built as
        ``Z = 0; V[k : R] = =(Z[]), k < R; K = index(V, 0); K == 0 ? D0 : K == 1 ? D1 : ...``
        with ``D<d>`` X's sizes as integer expressions (``_size_values``)."""
        pos = e.pos
        x = self._tensor(e, 0)
        shape = self._shape(x)
        if shape is None:
            self._missing_input(x)
            raise TileError(f"shape: the rank of {x.name} is not known (declare its "
                            f"dimensions, as in {x.name}[N, M])", pos.line, pos.column)
        rank = len(shape)
        z, v, k = self._fresh("Shape_Z"), self._fresh("Shape_V"), self._fresh("Shape_K")
        self._emit(_assign(z, A.Num(0, pos), pos))
        i = A.PolyName("i", pos)
        length = A.PolyNum(rank, pos)
        self._emit(_contraction(v, (i,), (length,), "=", A.TensorRef(z, (), pos), pos,
                                (A.Constraint(i, length, pos),)))
        self._emit(_assign(k, A.Call("index", (A.Name(v, pos), A.Num(0, pos)), pos), pos))
        kname = A.Name(k, pos)
        if rank == 0:
            return kname  # empty
        # every size sits behind a test on K, so the result has K's shape
        result: A.Expr = A.Num(0, pos)
        for d in range(rank - 1, -1, -1):
            test = A.Binary("==", kname, A.Num(d, pos), pos)
            result = A.Ternary(test, _size_value(shape[d], pos), result, pos)
        return result

    def _simple_reduce(self, e: A.Call) -> A.Expr:
        """``simple_reduce(X, S1, ..., Sk)``: the sum of X down to sizes S (PlaidML's gradient
        of broadcasting): X's leading dimensions are summed away, a size 1 sums its
        dimension, any other size keeps it."""
        pos = e.pos
        x = self._tensor(e, 0)
        shape = self._shape(x)
        targets = [self._size_arg(e, k) for k in range(1, len(e.args))]
        if shape is None:
            self._missing_input(x)
            raise TileError(f"simple_reduce: the rank of {x.name} is not known (declare its "
                            "dimensions)", pos.line, pos.column)
        rank = len(shape)
        if len(targets) > rank:
            raise TileError(f"simple_reduce: {len(targets)} sizes for {x.name} of rank {rank}",
                            pos.line, pos.column)
        lead = rank - len(targets)
        src: list[A.Poly] = [A.PolyName(f"i{k}", pos) for k in range(lead)]
        out: list[A.Poly] = []
        constraints: list[A.Constraint] = []
        for k, size in enumerate(targets):
            idx = A.PolyName(f"i{lead + k}", pos)
            value = _int_value(_poly_expr(size), self.consts)
            if value is not None:  # an integer (literal or constant statement)
                out.append(A.PolyNum(0, pos) if value == 1 else idx)
                src.append(idx)
                continue
            own = _size_poly(shape[lead + k])
            if isinstance(size, A.PolyName) and isinstance(own, A.PolyName) \
                    and own.name == size.name:
                out.append(idx)  # X's own size: kept
                src.append(idx)
                continue
            # the size is known only at binding: X[.., o + t, ..] -> O[.., o, ..] with
            # t < D - S + 1 keeps the dimension (S == D) or sums it (S == 1)
            if own is None:
                raise TileError(f"simple_reduce: size {k + 1} is not an integer literal and "
                                f"the size of {x.name} there is not a size expression",
                                pos.line, pos.column)
            t = A.PolyName(f"t{lead + k}", pos)
            out.append(idx)
            src.append(A.PolyBin("+", idx, t, pos))
            bound = A.PolyBin("+", A.PolyBin("-", own, size, pos), A.PolyNum(1, pos), pos)
            constraints.append(A.Constraint(t, bound, pos))
        name = self._fresh("Reduce")
        self._emit(_contraction(name, tuple(out), tuple(targets), "+",
                                A.TensorRef(x.name, tuple(src), pos), pos, tuple(constraints)))
        return A.Name(name, pos)

    def _missing_input(self, x: A.Name) -> None:
        """The binder's error for an input missing from ``inputs`` (its rank is unknown
        because no array was given)."""
        if isinstance(self.inputs, Mapping) and x.name not in self.inputs:
            for p in self.fn.params:
                if p.name == x.name:
                    raise TileError(f"input {p.name} is missing from inputs", p.pos.line,
                                    p.pos.column)

    # names, ranks, sizes ----------------------------------------------------------------------
    def _fresh(self, base: str) -> str:
        if self.taken is None:
            self.taken = set(_all_names(self.fn))
        while True:
            self.counter += 1
            name = f"{base}_{self.counter}"
            if name not in self.taken:
                self.taken.add(name)
                self.fresh.add(name)
                return name

    def _shape(self, root: A.Expr) -> Sizes | None:
        """The possible sizes of an expression's value (numpy broadcasting), None when its
        rank is unknown."""
        stack: list[tuple[A.Expr, bool]] = [(root, False)]
        done: list[Sizes | None] = []
        while stack:
            node, visited = stack.pop()
            kids = _kids(node)
            if not visited and kids:
                stack.append((node, True))
                stack.extend((k, False) for k in reversed(kids))
                continue
            shapes = done[len(done) - len(kids):] if kids else []
            if kids:
                del done[len(done) - len(kids):]
            done.append(self._node_shape(node, shapes))
        return done[0]

    def _node_shape(self, node: A.Expr, shapes: list[Sizes | None]) -> Sizes | None:
        if isinstance(node, A.Num):
            return ()
        if isinstance(node, A.Name):
            if node.name in self.shapes:
                return self.shapes[node.name]
            return () if node.name in self.dims else None
        if isinstance(node, A.Call):
            fn = node.fn
            if fn == "reshape":
                return tuple(self._one(a) for a in node.args[1:])
            if fn in _SPECIALS or fn == "index":
                if any(x is None for x in shapes) or not shapes:
                    return None
                if fn == "gather" and len(shapes) == 2 and shapes[0]:
                    return shapes[1] + shapes[0][1:]  # type: ignore[operator,index]
                if fn == "scatter" and len(shapes) == 3:
                    return shapes[2]
                return shapes[0] if fn == "index" else None
        return _broadcast(shapes)

    def _size_arg(self, e: A.Call, k: int) -> A.Poly:
        poly = _poly_of(e.args[k])
        if poly is None:
            arg = e.args[k]
            raise TileError(f"argument {k + 1} of {e.fn} must be a size (integers and "
                            "dimension names with + - * /)", arg.pos.line, arg.pos.column)
        return poly

# helpers ------------------------------------------------------------------------------------

def _poly_of(root: A.Expr) -> A.Poly | None:
    """A size expression from an elementwise one (integers, names, + - * /, max, min)."""
    stack: list[tuple[A.Expr, bool]] = [(root, False)]
    done: list[A.Poly] = []
    while stack:
        node, visited = stack.pop()
        if isinstance(node, A.Num):
            if not isinstance(node.value, int) or isinstance(node.value, bool):
                return None
            done.append(A.PolyNum(node.value, node.pos))
        elif isinstance(node, A.Name):
            done.append(A.PolyName(node.name, node.pos))
        elif isinstance(node, A.Unary) and node.op == "-":
            if visited:
                done.append(A.PolyNeg(done.pop(), node.pos))
            else:
                stack += [(node, True), (node.x, False)]
        elif isinstance(node, A.Binary) and node.op in ("+", "-", "*", "/"):
            if visited:
                b, a = done.pop(), done.pop()
                done.append(A.PolyBin(node.op, a, b, node.pos))
            else:
                stack += [(node, True), (node.b, False), (node.a, False)]
        elif isinstance(node, A.Call) and node.fn in ("max", "min") and len(node.args) == 2:
            if visited:
                b, a = done.pop(), done.pop()
                done.append(A.PolyCall(node.fn, (a, b), node.pos))
            else:
                stack += [(node, True), (node.args[1], False), (node.args[0], False)]
        else:
            return None
    return done[0]



def _calls(stmt: Stmt) -> set[str]:
    """The function names an elementwise statement calls."""
    if not isinstance(stmt, A.Assign):
        return set()
    names: set[str] = set()
    stack: list[A.Expr] = [stmt.expr]
    while stack:
        node = stack.pop()
        if isinstance(node, A.Call):
            names.add(node.fn)
        stack.extend(_kids(node))
    return names


def _broadcast(shapes: Sequence[Sizes | None]) -> Sizes | None:
    if any(x is None for x in shapes):
        return None
    rank = max((len(x) for x in shapes), default=0)  # type: ignore[arg-type]
    dims: list[dict[str, A.Expr]] = [{} for _ in range(rank)]
    for x in shapes:
        for k, sizes in enumerate(x, start=rank - len(x)):  # type: ignore[arg-type]
            if sizes and sizes is not dims[k]:
                dims[k] = {**dims[k], **sizes} if dims[k] else sizes
    return tuple(dims)


def _size_value(sizes: dict[str, A.Expr], pos: A.Pos) -> A.Expr:
    """A dimension's size as an integer expression: the first of its possible sizes that is
    not 1 (operands that broadcast have one size besides 1)."""
    values = list(sizes.values())
    if not values:
        return A.Num(1, pos)
    result = values[-1]
    for v in reversed(values[:-1]):
        result = A.Ternary(A.Binary("!=", v, A.Num(1, pos), pos), v, result, pos)
    return result


def _size_poly(sizes: dict[str, A.Expr]) -> A.Poly | None:
    """A dimension's size as a size expression (several possible sizes, which broadcast,
    give their max: the size, or 1 where the dimension is empty), None when a size is no size
    expression."""
    if not sizes:
        return A.PolyNum(1, A.Pos(0, 0))
    polys = [_poly_of(v) for v in sizes.values()]
    if any(p is None for p in polys):
        return None
    result = polys[0]
    for p in polys[1:]:
        result = A.PolyCall("max", (result, p), p.pos)  # type: ignore[arg-type,union-attr]
    return result


def _int_value(root: A.Expr, consts: Mapping[str, int]) -> int | None:
    """The value of an integer expression over literals and ``consts`` (C semantics for
    ``/`` and ``%``), None when it depends on anything else."""
    stack: list[tuple[A.Expr, bool]] = [(root, False)]
    done: list[int] = []
    while stack:
        node, visited = stack.pop()
        if isinstance(node, A.Num):
            if not isinstance(node.value, int) or isinstance(node.value, bool):
                return None
            done.append(node.value)
        elif isinstance(node, A.Name):
            if node.name not in consts:
                return None
            done.append(consts[node.name])
        elif isinstance(node, A.Unary) and node.op == "-":
            if visited:
                done.append(-done.pop())
            else:
                stack += [(node, True), (node.x, False)]
        elif (isinstance(node, A.Binary) and node.op in _INT_OPS) or (
                isinstance(node, A.Call) and node.fn in _INT_OPS and len(node.args) == 2):
            if visited:
                b, a = done.pop(), done.pop()
                op = node.op if isinstance(node, A.Binary) else node.fn
                if op in ("/", "%") and b == 0:
                    return None
                done.append(_INT_OPS[op](a, b))
            else:
                kids = _kids(node)
                stack += [(node, True), (kids[1], False), (kids[0], False)]
        else:
            return None
        if done and abs(done[-1]) >= 2**63:
            return None
    return done[0]


def _c_div(a: int, b: int) -> int:
    """Integer division truncating toward zero (C's)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


_INT_OPS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": _c_div, "%": lambda a, b: a - _c_div(a, b) * b, "max": max, "min": min,
}


def _output(stmt: Stmt) -> str:
    return stmt.out.name if isinstance(stmt, A.Contraction) else stmt.name


def _renamed(stmt: Stmt, like: A.Assign) -> Stmt:
    """``stmt`` writing ``like``'s tensor, with ``like``'s attributes."""
    if isinstance(stmt, A.Contraction):
        c = replace(stmt, out=replace(stmt.out, name=like.name), attrs=like.attrs)
        return replace(c, text=_contraction_text(c))
    return replace(stmt, name=like.name, text=f"{like.name} = {_text(stmt.expr)}",
                   attrs=like.attrs)


def _assign(name: str, expr: A.Expr, pos: A.Pos) -> A.Assign:
    return A.Assign(name, expr, pos, f"{name} = {_text(expr)}")


def _contraction(name: str, idxs: tuple[A.Poly, ...], sizes: tuple[A.Poly, ...], agg: str,
                 src: A.TensorRef, pos: A.Pos,
                 constraints: tuple[A.Constraint, ...] = ()) -> A.Contraction:
    c = A.Contraction(out=A.TensorRef(name, idxs, pos), sizes=sizes, agg=agg, comb=None,
                      inputs=(src,), constraints=constraints, no_defract=False, default=None,
                      pos=pos, text="")
    return replace(c, text=_contraction_text(c))


def _poly_expr(root: A.Poly) -> A.Expr:
    """A size expression as an elementwise expression (dimension names are integers there)."""
    stack: list[tuple[A.Poly, bool]] = [(root, False)]
    done: list[A.Expr] = []
    while stack:
        node, visited = stack.pop()
        if isinstance(node, A.PolyNum):
            done.append(A.Num(node.value, node.pos))
        elif isinstance(node, A.PolyName):
            done.append(A.Name(node.name, node.pos))
        elif isinstance(node, A.PolyNeg):
            if visited:
                done.append(A.Unary("-", done.pop(), node.pos))
            else:
                stack += [(node, True), (node.x, False)]
        elif isinstance(node, A.PolyCall):  # max or min
            if visited:
                args = done[len(done) - len(node.args):]
                del done[len(done) - len(node.args):]
                done.append(A.Call(node.fn, tuple(args), node.pos))
            else:
                stack += [(node, True), *((a, False) for a in reversed(node.args))]
        else:
            if visited:
                b, a = done.pop(), done.pop()
                done.append(A.Binary(node.op, a, b, node.pos))
            else:
                stack += [(node, True), (node.b, False), (node.a, False)]
    return done[0]


def _all_names(fn: A.Function) -> list[str]:
    """Every name the function mentions (tensors, dimensions, indexes), with repeats."""
    names: list[str] = []
    polys: list[A.Poly] = []
    exprs: list[A.Expr] = []
    for p in fn.params:
        names.append(p.name)
        polys.extend(p.dims or ())
    names.extend(o.name for o in fn.outputs)
    for s in fn.stmts:
        if isinstance(s, A.Assign):
            names.append(s.name)
            exprs.append(s.expr)
            continue
        for ref in (s.out, *s.inputs):
            names.append(ref.name)
            polys.extend(ref.idxs)
        polys.extend(s.sizes or ())
        for k in s.constraints:
            polys += [k.poly, k.bound]
        if s.default is not None:
            names.append(s.default.name)
    nodes: list[Node] = [*polys, *exprs]
    while nodes:
        node = nodes.pop()
        if isinstance(node, (A.Name, A.PolyName)):
            names.append(node.name)
        nodes.extend(child for child, _ in A.children(node))
    return names


def _check_depths(root: A.Expr) -> None:
    """The nesting limit of the parser, on a rewritten expression."""
    stack: list[tuple[Node, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        check_depth(depth, "an expression (after expanding builtin functions)",
                    node.pos.line, node.pos.column)
        stack.extend((child, depth + nests) for child, nests in A.children(node))
