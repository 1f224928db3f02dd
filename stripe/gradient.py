"""Reverse-mode differentiation of Tile functions, written as Tile (docs/gradients.md).

``gradient(source, wrt, of)`` returns the Tile source of a function whose inputs are every
input of ``source`` plus ``<C>_grad`` for each differentiated output ``C`` (its cotangent, C's
shape) and whose outputs are ``<A>_grad`` for each ``A`` in ``wrt`` (A's shape): the
vector-Jacobian product ``sum_C <C_grad, dC/dA>``. The gradient function recomputes the
forward values it needs (the forward statements are copied, unused ones dropped) and then runs
the usual reverse sweep, one or a few Tile statements per forward statement:

* ``+``/``=`` contractions: one contraction per operand over the same index space and
  constraints, writing into the operand's shape (so padding, strides, constants and repeated
  indexes in accesses are handled by Tile's own rules); a ``default`` D gets the cotangent
  (with ``=``, where no point writes);
* ``>``/``<`` contractions: the cotangent goes to the points equal to the (recomputed) result,
  split evenly between ties; of a combination, through a tensor of every point's value;
* ``*`` contractions of one operand: the product of the other factors, exact with zeros;
* elementwise statements: the chain rule over the expression, broadcasting undone by a ``+``
  contraction onto the operand's shape; ``reshape``, ``gather`` and ``scatter``.

Comparisons, integer conversions and ``floor``/``ceil``/``round`` pass no cotangent; an input
that a differentiated output depends on only through them is a :class:`GradientError` at the
statement that cuts the path, never a silent zero.

Sizes stay symbolic (dimension names, size expressions), so the result works for every input
shape the forward function accepts. Element types are known only when ``inputs`` is given: then
integer inputs are excluded from the default ``wrt`` (and refused in an explicit one), and each
``<A>_grad`` is converted to A's type where the computation promoted it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from .errors import ArgumentError, ArgumentTypeError, TileError
from .tile import ast as A
from .tile.builtins import expand
from .tile.parser import parse

__all__ = ["GradientError", "gradient"]

_FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
_NAME = re.compile(r"\b[A-Z][A-Za-z0-9_]*\b")
# functions whose derivative is zero almost everywhere or undefined: no cotangent flows
_STEP_FNS = ("floor", "ceil", "round", "as_int", "as_uint", "as_bool", "bool", "int8", "int16",
             "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_FLOAT_CASTS = ("as_float", "float16", "bfloat16", "float32", "float64")


class GradientError(TileError):
    """A requested gradient does not exist or is not supported; names the statement."""


def _stmt_error(stmt: A.Contraction | A.Assign, message: str) -> GradientError:
    return GradientError(f"{message} (in '{stmt.text}')", stmt.pos.line, stmt.pos.column)


# printing ------------------------------------------------------------------------------------

def _postorder(root: object) -> list[object]:
    """The nodes of an expression or polynomial, children before parents (iterative: any
    nesting depth)."""
    out: list[object] = []
    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            out.append(node)
            continue
        stack.append((node, True))
        stack.extend((c, False) for c, _ in reversed(A.children(node)))  # type: ignore[arg-type]
    return out


def _poly(root: A.Poly) -> str:
    text: dict[int, str] = {}
    for p in _postorder(root):
        if id(p) not in text:
            text[id(p)] = _poly_node(p, text)  # type: ignore[arg-type]
    return text[id(root)]


def _poly_node(p: A.Poly, text: dict[int, str]) -> str:
    if isinstance(p, A.PolyNum):
        return str(p.value)
    if isinstance(p, A.PolyName):
        return p.name
    if isinstance(p, A.PolyNeg):
        inner = text[id(p.x)]
        return f"-{inner}" if isinstance(p.x, (A.PolyNum, A.PolyName, A.PolyCall)) else (
            f"-({inner})")
    if isinstance(p, A.PolyCall):
        return f"{p.fn}({', '.join(text[id(a)] for a in p.args)})"
    left, right = text[id(p.a)], text[id(p.b)]
    if isinstance(p.a, A.PolyNeg) or (isinstance(p.a, A.PolyBin) and p.op in "*/"
                                       and p.a.op in "+-"):
        left = f"({left})"
    if isinstance(p.b, A.PolyNeg) or (isinstance(p.b, A.PolyBin) and (
            p.op in "*/" or p.b.op in "+-")):
        right = f"({right})"
    return f"{left} {p.op} {right}"


def _num(v: int | float) -> str:
    if isinstance(v, bool) or isinstance(v, int):
        return str(int(v))
    text = repr(float(v))
    return text if any(c in text for c in ".e") else text + ".0"


def _is_atom(e: A.Expr) -> bool:
    return isinstance(e, (A.Num, A.Name, A.Call))


def _expr(root: A.Expr) -> str:
    text: dict[int, str] = {}
    for e in _postorder(root):
        if id(e) not in text:
            text[id(e)] = _expr_node(e, lambda c: text[id(c)])  # type: ignore[arg-type]
    return text[id(root)]


def _expr_node(e: A.Expr, sub) -> str:  # type: ignore[no-untyped-def]
    """``e``'s text, its children's texts given by ``sub``."""
    def atom(c: A.Expr) -> str:
        t = sub(c)
        return t if _is_atom(c) or re.fullmatch(r"[A-Za-z0-9_.]+", t) else f"({t})"

    if isinstance(e, A.Num):
        return _num(e.value)
    if isinstance(e, A.Name):
        return e.name
    if isinstance(e, A.Call):
        return f"{e.fn}({', '.join(sub(a) for a in e.args)})"
    if isinstance(e, A.Unary):
        return f"{e.op}{atom(e.x)}"
    if isinstance(e, A.Binary):
        return f"{atom(e.a)} {e.op} {atom(e.b)}"
    return f"{atom(e.cond)} ? {atom(e.a)} : {atom(e.b)}"


def _ref(r: A.TensorRef, name: str | None = None) -> str:
    return f"{name or r.name}[{', '.join(_poly(p) for p in r.idxs)}]"


def _constraints(c: A.Contraction) -> str:
    return "".join(f", {_poly(k.poly)} < {_poly(k.bound)}" for k in c.constraints)


def _contraction_text(c: A.Contraction) -> str:
    sizes = ", ".join(_poly(p) for p in (c.sizes or ()))
    idxs = ", ".join(_poly(p) for p in c.out.idxs)
    head = f"{c.out.name}[{idxs} : {sizes}]" if c.sizes is not None and c.out.idxs else (
        f"{c.out.name}[{idxs}]")
    ins = [_ref(r) for r in c.inputs]
    if c.comb == "?":
        comb = f"{ins[0]} == {ins[1]} ? {ins[2]}"
    else:
        comb = f" {c.comb} ".join(ins) if c.comb else ins[0]
    text = f"{head} = {c.agg}({comb}){_constraints(c)}"
    if c.no_defract:
        text += " no_defract"
    if c.default is not None:
        text += f" default {c.default.name}"
    return text


def _stmt_text(s: A.Contraction | A.Assign) -> str:
    attrs = "".join(f"[[{a.name}({', '.join(a.params)})]] " if a.params else f"[[{a.name}]] "
                    for a in s.attrs)
    body = _contraction_text(s) if isinstance(s, A.Contraction) else f"{s.name} = {_expr(s.expr)}"
    return attrs + body + ";"


# the sweep -----------------------------------------------------------------------------------

Shape = tuple[str, ...]  # symbolic sizes, as Tile size-expression text


@dataclass
class _Emitted:
    text: str
    defines: str
    uses: frozenset[str]


@dataclass
class _Sweep:
    fn: A.Function
    taken: set[str]
    tensors: set[str] = field(default_factory=set)
    shapes: dict[str, Shape | None] = field(default_factory=dict)
    deps: dict[str, frozenset[str]] = field(default_factory=dict)
    size_stmts: list[_Emitted] = field(default_factory=list)
    back: list[_Emitted] = field(default_factory=list)
    cts: dict[str, list[str]] = field(default_factory=dict)
    cuts: list[tuple[frozenset[str], A.Contraction | A.Assign, str]] = field(default_factory=list)
    ones: dict[str, str] = field(default_factory=dict)
    one_scalar: str | None = None
    counter: int = 0

    # names and emission
    def fresh(self, hint: str) -> str:
        while True:
            name = f"{hint}_{self.counter}"
            self.counter += 1
            if name not in self.taken:
                self.taken.add(name)
                return name

    def emit(self, name: str, rhs_text: str, *, contraction: bool = False,
             into: list[_Emitted] | None = None) -> str:
        text = f"{rhs_text};" if contraction else f"{name} = {rhs_text};"
        uses = frozenset(_NAME.findall(text)) - {name}
        (self.back if into is None else into).append(_Emitted(text, name, uses))
        return name

    def add_ct(self, tensor: str, name: str) -> None:
        self.cts.setdefault(tensor, []).append(name)

    # shapes
    def shape(self, name: str, stmt: A.Contraction | A.Assign) -> Shape:
        s = self.shapes.get(name)
        if s is None:
            raise _stmt_error(stmt, f"the rank of {name} is unknown: declare its dimensions "
                                    f"({name}[N, M, ...]) or give `inputs`")
        return s

    def broadcast(self, shapes: Sequence[Shape]) -> Shape:
        rank = max((len(s) for s in shapes), default=0)
        out: list[str] = []
        for d in range(rank):
            sizes: list[str] = []
            for s in shapes:
                k = d - (rank - len(s))
                if k >= 0 and s[k] != "1" and s[k] not in sizes:
                    sizes.append(s[k])
            if not sizes:
                out.append("1")
                continue
            size = sizes[0]
            for other in sizes[1:]:
                size = self.emit(self.fresh("Size"), f"broadcast({size}, {other})",
                                 into=self.size_stmts)
            out.append(size)
        return tuple(out)

    def ones_like(self, tensor: str, stmt: A.Contraction | A.Assign) -> str:
        if tensor not in self.ones:
            if self.one_scalar is None:
                self.one_scalar = self.emit(self.fresh("One"), "1.0")
            shape = self.shape(tensor, stmt)
            idx = [f"d{k}" for k in range(len(shape))]
            name = self.fresh(f"Ones{tensor}")
            self.emit(name, _contraction_head(name, idx, shape)
                      + f" = =({self.one_scalar}[])", contraction=True)
            self.ones[tensor] = name
        return self.ones[tensor]

    def reduce_to(self, value: str, value_shape: Shape, tensor: str, target: Shape) -> str:
        """``value`` (of ``value_shape``, a broadcast of ``target``) summed onto ``target``."""
        if value_shape == target:
            return value
        if not _is_name(value):
            value = self.emit(self.fresh(f"D{tensor}"), value)
        lead = len(value_shape) - len(target)
        src: list[str] = [f"s{k}" for k in range(lead)]
        dst: list[str] = []
        cons: list[str] = []
        for k, (vs, ts) in enumerate(zip(value_shape[lead:], target)):
            if vs == ts:
                src.append(f"o{k}")
                dst.append(f"o{k}")
            elif ts == "1":
                src.append(f"s{lead + k}")
                dst.append("0")
            else:  # sizes decided when binding: equal (t = 0) or ts == 1 (o = 0)
                src.append(f"o{k} + t{k}")
                dst.append(f"o{k}")
                cons.append(f", t{k} < {_paren(vs)} - {_paren(ts)} + 1")
        name = self.fresh(f"R{tensor}")
        self.emit(name, _contraction_head(name, dst, target)
                  + f" = +({value}[{', '.join(src)}]){''.join(cons)}", contraction=True)
        return name


def _paren(size: str) -> str:
    return size if re.fullmatch(r"[A-Za-z0-9_]+", size) else f"({size})"


def _is_name(text: str) -> bool:
    return re.fullmatch(r"[A-Z][A-Za-z0-9_]*", text) is not None


def _contraction_head(name: str, idxs: Sequence[str], sizes: Shape) -> str:
    if not idxs:
        return f"{name}[]"
    return f"{name}[{', '.join(idxs)} : {', '.join(sizes)}]"


def _out_head(name: str, ref: A.TensorRef, shape: Shape) -> str:
    if not ref.idxs:
        return f"{name}[]"
    return f"{name}[{', '.join(_poly(p) for p in ref.idxs)} : {', '.join(shape)}]"


# values of subexpressions -------------------------------------------------------------------

_SMALL = 40  # a subexpression with more nodes that reads a tensor is kept in a temporary


class _Values:
    """Per elementwise statement: which subexpressions depend on a differentiated input, and
    the text that stands for a subexpression's value in a derivative (inline when small, a
    temporary computed once otherwise, the statement's own result for its root), so that
    derivatives of deep expressions stay linear in size."""

    def __init__(self, sw: _Sweep, s: A.Assign) -> None:
        self.sw, self.s = sw, s
        self.size: dict[int, int] = {}
        self.tensor: dict[int, bool] = {}
        self.dep: dict[int, frozenset[str]] = {}
        self.temps: dict[int, str] = {id(s.expr): s.name}
        for n in _postorder(s.expr):
            if id(n) in self.size:
                continue
            kids = [c for c, _ in A.children(n)]  # type: ignore[arg-type]
            self.size[id(n)] = 1 + sum(self.size[id(c)] for c in kids)
            if isinstance(n, A.Name):
                self.tensor[id(n)] = n.name in sw.tensors
                self.dep[id(n)] = sw.deps.get(n.name, frozenset())
            elif isinstance(n, A.Call) and n.fn == "index":
                self.tensor[id(n)] = True
                self.dep[id(n)] = frozenset()
            else:
                self.tensor[id(n)] = any(self.tensor[id(c)] for c in kids)
                self.dep[id(n)] = frozenset().union(*(self.dep[id(c)] for c in kids))

    def active(self, node: A.Expr) -> bool:
        return bool(self.dep[id(node)])

    def deps(self, node: A.Expr) -> frozenset[str]:
        return self.dep[id(node)]

    def _big(self, node: A.Expr) -> bool:
        return id(node) in self.temps or (self.size[id(node)] > _SMALL and self.tensor[id(node)])

    def text(self, node: A.Expr) -> str:
        if not self._big(node):
            return _expr(node)
        if id(node) not in self.temps:
            for n in _postorder(node):
                if id(n) in self.temps or not self._big(n):  # type: ignore[arg-type]
                    continue
                body = _expr_node(n, lambda c: self.temps[id(c)] if self._big(c)  # type: ignore[arg-type]
                                  else _expr(c))
                self.temps[id(n)] = self.sw.emit(self.sw.fresh(f"{self.s.name}_value"), body)
        return self.temps[id(node)]

    def atom(self, node: A.Expr) -> str:
        t = self.text(node)
        return t if _is_atom(node) or re.fullmatch(r"[A-Za-z0-9_.]+", t) else f"({t})"


# the public function -------------------------------------------------------------------------

def gradient(source: object, wrt: str | Sequence[str] | None = None,
             of: str | Sequence[str] | None = None,
             inputs: Mapping[str, object] | None = None) -> str:
    """The Tile source of the gradient of ``source`` (see the module docstring).

    ``source``: Tile text, or an object with ``tile_source``/``tile_inputs`` (stripe.ops).
    ``wrt``: an input name or a list of them (default: every input, or every floating-point
    input when element types are known, leaving out those that the outputs depend on only
    through comparisons, integer conversions or ``floor``-like functions). ``of``: an output
    name or a list (default: every output). ``inputs``: optional mapping as for
    ``stripe.lower``; with it, element types are checked and the result is checked to lower.

    Raises :class:`ArgumentTypeError`/:class:`ArgumentError` naming a bad argument, the front
    end's errors for bad Tile, and :class:`GradientError` (a TileError) at the statement where
    a requested gradient does not exist (a path only through comparisons, integer casts or
    ``floor``) or is not supported.
    """
    text, inputs = _resolve(source, inputs)
    fn = parse(text)
    fn = expand(fn, inputs, keep={"reverse_grad"})  # PlaidML's gradient reversal, below
    params = [p.name for p in fn.params]
    outputs = [o.name for o in fn.outputs]
    of_list = _names_arg("of", of, outputs, "output")
    dtypes, shapes = _dtypes(fn, inputs) if inputs is not None else (None, {})
    if wrt is None:
        wrt_list = [p for p in params
                    if dtypes is None or dtypes[p] in _FLOAT_DTYPES]
        if not wrt_list:
            raise ArgumentError("wrt: the function has no floating-point input to differentiate")
    else:
        wrt_list = _names_arg("wrt", wrt, params, "input")
        if dtypes is not None:
            for p in wrt_list:
                if dtypes[p] not in _FLOAT_DTYPES:
                    raise ArgumentError(f"wrt: input {p} is {dtypes[p]}: only floating-point "
                                        "inputs have a gradient")
    if dtypes is not None:
        for o in of_list:
            if dtypes[o] not in _FLOAT_DTYPES:
                raise ArgumentError(f"of: output {o} is {dtypes[o]}: only floating-point "
                                    "outputs can be differentiated")
    args = (fn, text, params, outputs, wrt_list, of_list, inputs)
    result = _Builder(*args, {}, wrt is None).run()
    if inputs is None:
        return result
    # lower the result once: it must lower, and each A_grad must have A's element type
    from .tile.lower import lower
    specs = dict(inputs)
    for o in of_list:
        specs[f"{o}_grad"] = (shapes[o], dtypes[o])
    got = {r.into: r.dtype.long_name for r in lower(result, specs).refs}
    casts = {a: dtypes[a] for a in wrt_list
             if f"{a}_grad" in got and got[f"{a}_grad"] != dtypes[a]}
    if casts:
        result = _Builder(*args, casts, wrt is None).run()
    return result


def _resolve(source: object, inputs: Mapping[str, object] | None
             ) -> tuple[str, Mapping[str, object] | None]:
    if isinstance(source, str):
        if inputs is not None and not isinstance(inputs, Mapping):
            raise ArgumentTypeError(f"inputs must be a mapping, got {type(inputs).__name__}")
        return source, inputs
    from .tile.source import resolve
    text, ins = resolve(source, inputs)
    return text, ins


def _names_arg(arg: str, value: object, allowed: Sequence[str], what: str) -> list[str]:
    if value is None:
        return list(allowed)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ArgumentTypeError(f"{arg} must be a name or a list of names, got "
                                f"{type(value).__name__}")
    if not value:
        raise ArgumentError(f"{arg} must name at least one {what}")
    seen: list[str] = []
    for v in value:
        if v not in allowed:
            raise ArgumentError(f"{arg}: {v!r} is not an {what} of the function "
                                f"({', '.join(allowed)})")
        if v in seen:
            raise ArgumentError(f"{arg}: {v!r} is listed twice")
        seen.append(v)
    return seen


def _dtypes(fn: A.Function, inputs: Mapping[str, object]
            ) -> tuple[dict[str, str], dict[str, tuple[int, ...]]]:
    """Element type and sizes of every tensor of ``fn`` lowered with ``inputs``."""
    from .tile.lower import lower
    prog = lower(_function_text(fn), inputs)
    return ({r.into: r.dtype.long_name for r in prog.refs},
            {r.into: r.shape.sizes for r in prog.refs})


def _param_text(p: A.Param) -> str:
    if p.dims is None:
        return p.name
    return f"{p.name}[{', '.join(_poly(d) for d in p.dims)}]"


def _function_text(fn: A.Function) -> str:
    body = "".join(f"    {_stmt_text(s)}\n" for s in fn.stmts)
    return (f"function ({', '.join(_param_text(p) for p in fn.params)}) -> "
            f"({', '.join(o.name for o in fn.outputs)}) {{\n{body}}}\n")


class _Builder:
    def __init__(self, fn: A.Function, text: str, params: list[str], outputs: list[str],
                 wrt: list[str], of: list[str], inputs: Mapping[str, object] | None,
                 casts: Mapping[str, str], optional: bool = False) -> None:
        self.fn = fn
        self.params = params
        self.outputs = outputs
        self.wrt = wrt
        self.of = of
        self.inputs = inputs
        self.casts = casts
        self.optional = optional
        taken = set(_NAME.findall(text)) | set(_NAME.findall(_function_text(fn)))
        for name in [f"{x}_grad" for x in (*wrt, *of)]:
            if name in taken:
                raise ArgumentError(f"the function already uses the name {name}, which the "
                                    "gradient function needs for a cotangent")
        self.sw = _Sweep(fn, taken)
        self.param_decl: dict[str, str] = {}

    # shapes and dependencies of the forward function
    def _forward(self) -> None:
        sw = self.sw
        wrt = set(self.wrt)
        for p in self.fn.params:
            sw.tensors.add(p.name)
            sw.deps[p.name] = frozenset({p.name}) if p.name in wrt else frozenset()
            if p.dims is not None:
                sw.shapes[p.name] = tuple(_poly(d) for d in p.dims)
                self.param_decl[p.name] = _param_text(p)
            else:
                rank = _input_rank(self.inputs, p.name)
                if rank is None:
                    sw.shapes[p.name] = None
                    self.param_decl[p.name] = p.name
                else:
                    dims = tuple(sw.fresh(f"{p.name}_D") for _ in range(rank))
                    sw.shapes[p.name] = dims
                    self.param_decl[p.name] = (f"{p.name}[{', '.join(dims)}]" if dims
                                               else f"{p.name}[]")
        for s in self.fn.stmts:
            if isinstance(s, A.Contraction):
                name = s.out.name
                used = [r.name for r in s.inputs] + ([s.default.name] if s.default else [])
                sw.shapes[name] = tuple(_poly(p) for p in (s.sizes or ()))
            else:
                name = s.name
                used = [n for n in _expr_names(s.expr) if n in sw.tensors]
                sw.shapes[name] = self._assign_shape(s)
            sw.tensors.add(name)
            sw.deps[name] = frozenset().union(*(sw.deps.get(u, frozenset()) for u in used))

    def _assign_shape(self, s: A.Assign) -> Shape | None:
        sw = self.sw
        e = s.expr
        if isinstance(e, A.Call) and e.fn == "reshape":
            return tuple(_expr(a) for a in e.args[1:])
        if isinstance(e, A.Call) and e.fn == "gather":
            a, i = (sw.shapes.get(x.name) for x in e.args)  # type: ignore[union-attr]
            return None if a is None or i is None else i + a[1:]
        if isinstance(e, A.Call) and e.fn == "scatter":
            return sw.shapes.get(e.args[2].name)  # type: ignore[union-attr]
        leaves = [n for n in _expr_names(e, with_index=True) if n in sw.tensors]
        shapes = [sw.shapes.get(n) for n in leaves]
        if any(x is None for x in shapes):
            return None
        if not any(sw.deps.get(n) for n in leaves):
            # not on a differentiated path: its shape is never needed
            return self._lazy_shape(shapes)  # type: ignore[arg-type]
        return sw.broadcast(shapes)  # type: ignore[arg-type]

    def _lazy_shape(self, shapes: list[Shape]) -> Shape | None:
        rank = max((len(s) for s in shapes), default=0)
        out: list[str] = []
        for d in range(rank):
            sizes = {s[d - (rank - len(s))] for s in shapes if d - (rank - len(s)) >= 0} - {"1"}
            if len(sizes) > 1:
                return None
            out.append(next(iter(sizes)) if sizes else "1")
        return tuple(out)

    def run(self) -> str:
        sw = self.sw
        self._forward()
        active_of = [o for o in self.of if sw.deps.get(o)]
        for o in self.of:
            sw.add_ct(o, f"{o}_grad")
        for s in reversed(self.fn.stmts):
            name = s.out.name if isinstance(s, A.Contraction) else s.name
            cts = sw.cts.get(name)
            if not cts or not sw.deps.get(name):
                continue
            bar = cts[0] if len(cts) == 1 else sw.emit(sw.fresh(f"{name}_bar"), " + ".join(cts))
            if isinstance(s, A.Contraction):
                self._contraction(s, bar)
            else:
                self._assign(s, bar)
        if self.optional:
            # a default wrt leaves out the inputs with only cut paths (integer inputs,
            # conditions), unless that leaves nothing: then the first one's error stands
            kept = [a for a in self.wrt if sw.cts.get(a) or not any(
                a in sw.deps[o] for o in active_of) or not any(a in d for d, _, _ in sw.cuts)]
            self.wrt = kept or self.wrt
        finals: list[_Emitted] = []
        for a in self.wrt:
            final = self._final(a, active_of)
            if final is not None:
                finals.append(final)
        return self._assemble(finals)

    def _rename(self, name: str, out: str) -> bool:
        """Let the backward statement that defines ``name`` write ``out`` directly, when
        ``name`` is used nowhere else and no conversion is needed."""
        sw = self.sw
        if out[:-len("_grad")] in self.casts:
            return False
        defs = [k for k, st in enumerate(sw.back) if st.defines == name]
        users = [st for st in sw.back if name in st.uses]
        uses = sum(c.count(name) for c in sw.cts.values())
        if len(defs) != 1 or users or uses != 1:
            return False
        st = sw.back[defs[0]]
        sw.back[defs[0]] = _Emitted(re.sub(rf"\b{name}\b", out, st.text), out, st.uses)
        return True

    def _final(self, a: str, active_of: list[str]) -> _Emitted | None:
        sw = self.sw
        cts = sw.cts.get(a, [])
        out = f"{a}_grad"
        shape = self.sw.shapes.get(a)
        if not cts:
            reaching = [o for o in active_of if a in sw.deps[o]]
            if reaching:
                cut = next((s for d, s, why in sw.cuts if a in d), None)
                why = next((w for d, _, w in sw.cuts if a in d), "")
                if cut is not None:
                    raise _stmt_error(cut, f"no gradient of {', '.join(reaching)} with respect "
                                           f"to {a}: it depends on {a} only through {why}")
            if shape is None:
                raise GradientError(f"the rank of {a} is unknown: declare its dimensions or "
                                    "give `inputs`")
            idx = [f"d{k}" for k in range(len(shape))]
            if idx:
                text = (f"{_contraction_head(out, idx, shape)} = =({a}[{', '.join(idx)}]), "
                        f"d0 < 0;")  # an empty index space: zeros of A's type
            else:
                text = f"{out}[] = =({a}[]), d0 < 0;"
            return _Emitted(text, out, frozenset({a}))
        if len(cts) == 1 and self._rename(cts[0], out):
            return None
        value = " + ".join(cts)
        if a in self.casts:
            value = f"{self.casts[a]}({value})"
        text = f"{out} = {value};"
        return _Emitted(text, out, frozenset(_NAME.findall(text)) - {out})

    def _assemble(self, finals: list[_Emitted]) -> str:
        sw = self.sw
        fwd = [_Emitted(_stmt_text(s), s.out.name if isinstance(s, A.Contraction) else s.name,
                        frozenset(_NAME.findall(_stmt_text(s))) - {
                            s.out.name if isinstance(s, A.Contraction) else s.name})
               for s in self.fn.stmts]
        checks: list[_Emitted] = []
        grad_params: list[str] = []
        for o in self.of:
            shape = sw.shapes.get(o)
            if shape is None:
                grad_params.append(f"{o}_grad")
                continue
            if any(set(_NAME.findall(size)) & set(self.params) for size in shape):
                # a size read from an integer input: `match` takes constants only, so the
                # cotangent's shape is checked as the `default` of a contraction of that shape
                zero = sw.emit(sw.fresh("Zero"), "0.0", into=checks)
                idx = [f"d{k}" for k in range(len(shape))]
                chk = sw.fresh("Check")
                sw.emit(chk, f"{_contraction_head(chk, idx, shape)} = =({zero}[]), d0 < 0 "
                             f"default {o}_grad", contraction=True, into=checks)
                grad_params.append(f"{o}_grad")
                continue
            dims: list[str] = []
            for size in shape:
                if re.fullmatch(r"[0-9]+", size) or _is_dim(size, self.fn):
                    dims.append(size)
                else:
                    d = sw.fresh(f"{o}_grad_D")
                    dims.append(d)
                    sw.emit(sw.fresh("Check"), f"match({d}, {size})", into=checks)
            grad_params.append(f"{o}_grad[{', '.join(dims)}]" if dims else f"{o}_grad[]")
        body = fwd + sw.size_stmts + checks + sw.back + finals
        # keep what the outputs need (and every check)
        needed = {f"{a}_grad" for a in self.wrt}
        keep: list[_Emitted] = []
        for st in reversed(body):
            if st.defines in needed or st in checks:
                keep.append(st)
                needed |= st.uses
        keep.reverse()
        decls = [self.param_decl[p] for p in self.params] + grad_params
        outs = ", ".join(f"{a}_grad" for a in self.wrt)
        lines = "".join(f"    {st.text}\n" for st in keep)
        return f"function ({', '.join(decls)}) -> ({outs}) {{\n{lines}}}\n"

    # contractions
    def _contraction(self, c: A.Contraction, bar: str) -> None:
        sw = self.sw
        refs = c.inputs
        active = [k for k, r in enumerate(refs) if sw.deps.get(r.name)]
        oref = _ref(c.out, bar)
        cons = _constraints(c)
        if c.default is not None and sw.deps.get(c.default.name):
            if c.agg == "+":
                sw.add_ct(c.default.name, bar)
            elif c.agg == "=" and c.comb in (None, "*", "+"):
                # D shows where no point writes: mark the written elements
                ones = [_ref(r, sw.ones_like(r.name, c)) for r in refs]
                written = sw.fresh(f"Written{c.out.name}")
                sw.emit(written, f"{_out_head(written, c.out, sw.shapes[c.out.name])} = "
                                 f"=({' * '.join(ones)}){cons}", contraction=True)
                sw.add_ct(c.default.name,
                          sw.emit(sw.fresh(f"D{c.default.name}"), f"{written} == 0 ? {bar} : 0"))
            else:
                raise _stmt_error(c, f"no gradient for 'default' with '{c.agg}' aggregation "
                                     "(only with '+', and '=' without '?')")
        if not active:
            return
        if c.comb == "==":
            sw.cuts.append((sw.deps[c.out.name], c, "a comparison"))
            return
        if c.comb == "?" and c.agg in "+=":
            for k in active:
                if k < 2:
                    sw.cuts.append((sw.deps[refs[k].name], c, "the condition of '?'"))
            if 2 in active:
                r = refs[2]
                self._operand(c, r, f"{_ref(refs[0])} == {_ref(refs[1])} ? {oref}", cons)
            return
        if c.agg in "+=":
            for k in active:
                r = refs[k]
                if c.comb is None:
                    comb = oref
                elif c.comb == "*":
                    other = refs[1 - k]
                    comb = f"{oref} * {_ref(other)}" if k == 0 else f"{_ref(other)} * {oref}"
                else:  # '+': each point adds its cotangent once, over the other's range too
                    other = refs[1 - k]
                    comb = f"{oref} * {_ref(other, sw.ones_like(other.name, c))}"
                self._operand(c, r, comb, cons)
            return
        if c.comb is not None:
            if c.agg == "*":
                raise _stmt_error(c, f"no gradient for '*' aggregation of a combination "
                                     f"'{c.comb}' (only of a single operand)")
            self._extremum_of_combination(c, bar, active)
            return
        r = refs[0]
        if c.agg in "><":
            # ties share the cotangent evenly
            count = sw.fresh(f"Ties{c.out.name}")
            sw.emit(count, f"{_out_head(count, c.out, sw.shapes[c.out.name])} = "
                           f"+({_ref(r)} == {_ref(c.out)} ? "
                           f"{_ref(c.out, sw.ones_like(c.out.name, c))}){cons}",
                    contraction=True)
            share = sw.emit(sw.fresh(f"Share{c.out.name}"), f"{bar} / {count}")
            self._operand(c, r, f"{_ref(r)} == {_ref(c.out)} ? {_ref(c.out, share)}", cons)
            return
        # '*' aggregation: d/dv(p) = product of the other factors, exact with zeros
        shape_o = sw.shapes[c.out.name]
        nz = sw.emit(sw.fresh(f"Nonzero{r.name}"), f"{r.name} == 0 ? 1 : {r.name}")
        zero = sw.emit(sw.fresh(f"IsZero{r.name}"), f"{r.name} == 0 ? 1.0 : 0.0")
        inv = sw.emit(sw.fresh(f"Inverse{r.name}"), f"{r.name} == 0 ? 0 : 1 / {r.name}")
        prod = sw.fresh(f"Prod{c.out.name}")
        sw.emit(prod, f"{_out_head(prod, c.out, shape_o)} = *({_ref(r, nz)}){cons}",
                contraction=True)
        zeros = sw.fresh(f"Zeros{c.out.name}")
        sw.emit(zeros, f"{_out_head(zeros, c.out, shape_o)} = +({_ref(r, zero)}){cons}",
                contraction=True)
        g1 = sw.emit(sw.fresh(f"OneZero{c.out.name}"), f"{zeros} == 1 ? {bar} * {prod} : 0")
        g0 = sw.emit(sw.fresh(f"NoZero{c.out.name}"), f"{zeros} == 0 ? {bar} * {prod} : 0")
        self._operand(c, r, f"{_ref(c.out, g1)} * {_ref(r, zero)}", cons)
        self._operand(c, r, f"{_ref(c.out, g0)} * {_ref(r, inv)}", cons)

    def _extremum_of_combination(self, c: A.Contraction, bar: str, active: list[int]) -> None:
        """``>``/``<`` of ``A ⊕ B``: the value of every point is kept in a tensor V over the
        index space (NaN where a point is outside it), the cotangent is routed to the points
        equal to the result (ties share it evenly), then to the operands."""
        sw = self.sw
        refs, cons = c.inputs, _constraints(c)
        order: list[str] = []
        for ref in (c.out, *refs):
            for p in ref.idxs:
                for n in _poly_indexes(p):
                    if n not in order:
                        order.append(n)
        for k in c.constraints:
            for n in _poly_indexes(k.poly):
                if n not in order:
                    order.append(n)
        # V's dimensions: access dimensions whose affine forms are independent and span every
        # index, so distinct points get distinct elements, each within its tensor's bounds
        dims: list[tuple[A.Poly, str]] = []
        basis: list[dict[str, Fraction]] = []
        for ref in (c.out, *refs):
            shape = sw.shapes[c.out.name] if ref is c.out else sw.shape(ref.name, c)
            for p, sz in zip(ref.idxs, shape):
                row = _linear(p)
                if row is not None and _independent(row, basis):
                    dims.append((p, sz))
        if len(dims) < len(order):
            raise _stmt_error(c, f"no gradient for '{c.agg}' of a combination whose indexes "
                                 "are not determined by its accesses")
        order = [_poly(p) for p, _ in dims]
        sizes = [sz for _, sz in dims]
        shape_v = tuple(sizes)
        at = f"[{', '.join(order)}]"
        box = [f"d{k}" for k in range(len(shape_v))]
        nan = sw.emit(sw.fresh("Nan"), "sqrt(-1.0)")
        fill = sw.fresh(f"Outside{c.out.name}")
        sw.emit(fill, f"{_contraction_head(fill, box, shape_v)} = =({nan}[])",
                contraction=True)
        ins = [_ref(r) for r in refs]
        comb = (f"{ins[0]} == {ins[1]} ? {ins[2]}" if c.comb == "?"
                else f" {c.comb} ".join(ins))
        points = sw.fresh(f"Points{c.out.name}")
        sw.emit(points, f"{_contraction_head(points, order, shape_v)} = =({comb}){cons} "
                        f"default {fill}", contraction=True)
        ones = _ref(c.out, sw.ones_like(c.out.name, c))
        count = sw.fresh(f"Ties{c.out.name}")
        shape_o = sw.shapes[c.out.name]
        sw.emit(count, f"{_out_head(count, c.out, shape_o)} = +({points}{at} == "
                       f"{_ref(c.out)} ? {ones}){cons}", contraction=True)
        share = sw.emit(sw.fresh(f"Share{c.out.name}"), f"{bar} / {count}")
        routed = sw.fresh(f"Routed{c.out.name}")
        sw.emit(routed, f"{_contraction_head(routed, order, shape_v)} = +({points}{at} == "
                        f"{_ref(c.out)} ? {_ref(c.out, share)}){cons}", contraction=True)
        for k in active:
            r = refs[k]
            if c.comb == "*":
                other = _ref(refs[1 - k])
                comb = f"{routed}{at} * {other}" if k == 0 else f"{other} * {routed}{at}"
            elif c.comb == "+":
                comb = f"{routed}{at}"
            elif k == 2:
                comb = f"{ins[0]} == {ins[1]} ? {routed}{at}"
            else:
                sw.cuts.append((sw.deps[r.name], c, "the condition of '?'"))
                continue
            self._operand(c, r, comb, cons)

    def _operand(self, c: A.Contraction, r: A.TensorRef, comb: str, cons: str) -> None:
        sw = self.sw
        shape = sw.shape(r.name, c)
        name = sw.fresh(f"D{r.name}")
        sw.emit(name, f"{_out_head(name, r, shape)} = +({comb}){cons}", contraction=True)
        sw.add_ct(r.name, name)

    # elementwise statements
    def _assign(self, s: A.Assign, bar: str) -> None:
        sw = self.sw
        e = s.expr
        if isinstance(e, A.Call) and e.fn in ("reshape", "gather", "scatter"):
            self._special(s, e, bar)
            return
        shape_x = sw.shape(s.name, s)
        vals = _Values(sw, s)
        contribs: dict[str, list[str]] = {}
        stack: list[tuple[A.Expr, str]] = [(e, bar)]
        while stack:
            node, adj = stack.pop()
            if isinstance(node, A.Name):
                if node.name in sw.tensors and sw.deps.get(node.name):
                    contribs.setdefault(node.name, []).append(adj)
                continue
            if not vals.active(node):
                continue
            kids = [k for k, _ in A.children(node)]  # type: ignore[misc]
            if not _is_name(adj) and (sum(vals.active(k) for k in kids) > 1
                                      or len(adj) > 4 * _SMALL):
                adj = sw.emit(sw.fresh(f"{s.name}_adj"), adj)  # shared, or long
            for child, child_adj in self._partials(s, node, adj, vals):
                if child_adj is not None:
                    stack.append((child, child_adj))
        order = _expr_names(e)
        for tensor in sorted(contribs, key=order.index):
            parts = contribs[tensor]
            value = " + ".join(parts) if len(parts) == 1 else " + ".join(
                f"({p})" if not _is_name(p) else p for p in parts)
            red = sw.reduce_to(value, shape_x, tensor, sw.shape(tensor, s))
            if red == value and not _is_name(value):
                red = sw.emit(sw.fresh(f"D{tensor}"), value)
            sw.add_ct(tensor, red)

    def _special(self, s: A.Assign, e: A.Call, bar: str) -> None:
        sw = self.sw
        src = e.args[0]
        assert isinstance(src, A.Name)
        if e.fn == "reshape":
            if sw.deps.get(src.name):
                sizes = sw.shape(src.name, s)
                args = ", ".join(sizes)
                name = sw.emit(sw.fresh(f"D{src.name}"),
                               f"reshape({bar}{', ' + args if args else ''})")
                sw.add_ct(src.name, name)
            return
        if e.fn == "gather":
            idx = e.args[1]
            assert isinstance(idx, A.Name)
            if sw.deps.get(src.name):
                n0 = sw.shape(src.name, s)[0]
                clamped = sw.emit(sw.fresh(f"Clamped{idx.name}"),
                                  f"min(max({idx.name}, 0), {_paren(n0)} - 1)")
                name = sw.emit(sw.fresh(f"D{src.name}"), f"scatter({bar}, {clamped}, {src.name})")
                sw.add_ct(src.name, name)
            return
        idx, like = e.args[1], e.args[2]
        assert isinstance(idx, A.Name) and isinstance(like, A.Name)
        if sw.deps.get(src.name):
            # scatter skips out-of-range rows: their elements get no cotangent
            ishape, lshape = sw.shape(idx.name, s), sw.shape(like.name, s)
            picked = sw.emit(sw.fresh(f"Picked{src.name}"), f"gather({bar}, {idx.name})")
            inside = sw.emit(sw.fresh(f"Inside{idx.name}"),
                             f"{idx.name} >= 0 && {idx.name} < {_paren(lshape[0])}")
            if len(lshape) > 1:
                inside = sw.emit(sw.fresh(f"Inside{idx.name}"), "reshape(" + ", ".join(
                    [inside, *ishape, *(["1"] * (len(lshape) - 1))]) + ")")
            sw.add_ct(src.name, sw.emit(sw.fresh(f"D{src.name}"), f"{inside} ? {picked} : 0"))

    def _partials(self, s: A.Assign, node: A.Expr, adj: str, vals: _Values
                  ) -> list[tuple[A.Expr, str | None]]:
        sw = self.sw
        if isinstance(node, A.Num):
            return []
        if isinstance(node, A.Unary):
            if node.op == "-":
                return [(node.x, f"-{_p(adj)}")]
            sw.cuts.append((vals.deps(node), s, f"'{node.op}'"))
            return []
        if isinstance(node, A.Ternary):
            sw.cuts.append((vals.deps(node.cond), s, "the condition of '?'"))
            return [(node.a, f"{vals.atom(node.cond)} ? {_p(adj)} : 0"),
                    (node.b, f"{vals.atom(node.cond)} ? 0 : {_p(adj)}")]
        if isinstance(node, A.Binary):
            a, b, op = node.a, node.b, node.op
            pa, pb = vals.atom(a), vals.atom(b)
            g = _p(adj)
            if op == "+":
                return [(a, adj), (b, adj)]
            if op == "-":
                return [(a, adj), (b, f"-{g}")]
            if op == "*":
                return [(a, f"{g} * {pb}"), (b, f"{g} * {pa}")]
            if op == "/":
                return [(a, f"{g} / {pb}"), (b, f"-{g} * {pa} / ({pb} * {pb})")]
            if op == "%":
                return [(a, adj), (b, f"-{g} * (({pa} - {pa} % {pb}) / {pb})")]
            sw.cuts.append((vals.deps(node), s, f"the operator '{op}'"))
            return []
        assert isinstance(node, A.Call)
        fn, args = node.fn, node.args
        g = _p(adj)
        if fn in _FLOAT_CASTS and args:
            return [(args[0], adj)]
        if fn in _STEP_FNS:
            sw.cuts.append((vals.deps(node), s, f"{fn}(), which has no gradient"))
            return []
        if fn == "index":
            return []
        want = 2 if fn in ("max", "min", "pow", "reverse_grad") else 1
        if len(args) != want:
            raise TileError(f"{fn} takes {want} argument{'s' if want > 1 else ''}, got "
                            f"{len(args)}", node.pos.line, node.pos.column)
        x = vals.atom(args[0]) if args else ""
        xe = vals.text(args[0]) if args else ""
        # a call whose value is kept (the statement's result, or a temporary) is not recomputed
        own = vals.text(node) if vals._big(node) else None
        exp_v, tanh_v, sqrt_v = own or f"exp({xe})", own or f"tanh({xe})", own or f"sqrt({xe})"
        unary = {
            "exp": f"{g} * {exp_v}",
            "log": f"{g} / {x}",
            "sqrt": f"{g} / (2 * {sqrt_v})",
            "tanh": f"{g} * (1 - {tanh_v} * {tanh_v})",
            "sin": f"{g} * cos({xe})",
            "cos": f"-{g} * sin({xe})",
            "tan": f"{g} * (1 + tan({xe}) * tan({xe}))",
            "asin": f"{g} / sqrt(1 - {x} * {x})",
            "acos": f"-{g} / sqrt(1 - {x} * {x})",
            "atan": f"{g} / (1 + {x} * {x})",
            "sinh": f"{g} * cosh({xe})",
            "cosh": f"{g} * sinh({xe})",
            "asinh": f"{g} / sqrt({x} * {x} + 1)",
            "acosh": f"{g} / sqrt({x} * {x} - 1)",
            "atanh": f"{g} / (1 - {x} * {x})",
            "abs": f"{x} > 0 ? {g} : ({x} < 0 ? -{g} : 0)",
        }
        if fn in unary:
            return [(args[0], unary[fn])]
        if fn == "reverse_grad":  # PlaidML: the value of x, the gradient -s * g
            return [(args[0], f"-{_p(vals.atom(args[1]))} * {g}")]
        if fn in ("max", "min"):
            a, b = vals.atom(args[0]), vals.atom(args[1])
            win = ">" if fn == "max" else "<"
            return [(args[0], f"{a} {win} {b} ? {g} : ({a} == {b} ? 0.5 * {g} : 0)"),
                    (args[1], f"{b} {win} {a} ? {g} : ({a} == {b} ? 0.5 * {g} : 0)")]
        if fn == "pow":
            a, b = vals.atom(args[0]), vals.atom(args[1])
            out = [(args[0], f"{g} * {b} * pow({a}, {b} - 1)")]
            if vals.active(args[1]):
                out.append((args[1], f"{a} == 0 ? 0 : {g} * pow({a}, {b}) * log({a})"))
            return out
        raise _stmt_error(s, f"no gradient for the function '{fn}'")


def _p(text: str) -> str:
    return text if re.fullmatch(r"[A-Za-z0-9_.]+", text) else f"({text})"


def _expr_names(root: A.Expr, with_index: bool = False) -> list[str]:
    """Upper-case names read by an expression, in first-use order (``index(A, d)`` reads only
    A's shape: its A counts only with ``with_index``)."""
    out: list[str] = []
    stack: list[A.Expr] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, A.Name):
            if node.name not in out:
                out.append(node.name)
        elif isinstance(node, A.Call) and node.fn == "index" and not with_index:
            continue
        else:
            stack.extend(reversed([c for c, _ in A.children(node)]))  # type: ignore[misc]
    return out


def _linear(root: A.Poly) -> dict[str, Fraction] | None:
    """The index coefficients of an affine access (constants dropped), or None when a
    coefficient is not an integer literal."""
    lin: dict[int, dict[str, Fraction] | None] = {}
    for p in _postorder(root):
        if id(p) in lin:
            continue
        out: dict[str, Fraction] | None
        if isinstance(p, A.PolyNum):
            out = {}
        elif isinstance(p, A.PolyName):
            out = {p.name: Fraction(1)} if p.is_index else {}
        elif isinstance(p, A.PolyNeg):
            x = lin[id(p.x)]
            out = None if x is None else {k: -v for k, v in x.items()}
        elif isinstance(p, A.PolyCall):
            out = None if any(lin[id(a)] for a in p.args) else {}
        else:
            x, y = lin[id(p.a)], lin[id(p.b)]
            if x is None or y is None:
                out = None
            elif p.op in "+-":
                sign = 1 if p.op == "+" else -1
                out = dict(x)
                for k, v in y.items():
                    out[k] = out.get(k, Fraction(0)) + sign * v
                out = {k: v for k, v in out.items() if v}
            elif p.op == "*" and not x and isinstance(p.a, A.PolyNum):
                out = {k: v * p.a.value for k, v in y.items()}
            elif p.op == "*" and not y and isinstance(p.b, A.PolyNum):
                out = {k: v * p.b.value for k, v in x.items()}
            else:
                out = None if (x or y) else {}
        lin[id(p)] = out  # type: ignore[index]
    return lin[id(root)]


def _independent(row: dict[str, Fraction], basis: list[dict[str, Fraction]]) -> bool:
    """Whether ``row`` is independent of ``basis`` (kept in echelon form: each row's first
    key is its pivot); if so it is added."""
    row = dict(row)
    for b in basis:
        pivot = next(iter(b))
        if row.get(pivot):
            f = row[pivot] / b[pivot]
            for k, v in b.items():
                row[k] = row.get(k, Fraction(0)) - f * v
            row = {k: v for k, v in row.items() if v}
    if not row:
        return False
    pivot = next(iter(row))
    basis.append({pivot: row[pivot], **{k: v for k, v in row.items() if k != pivot}})
    return True


def _poly_indexes(p: A.Poly) -> list[str]:
    out: list[str] = []
    stack: list[A.Poly] = [p]
    while stack:
        node = stack.pop()
        if isinstance(node, A.PolyName) and node.is_index and node.name not in out:
            out.append(node.name)
        stack.extend(reversed([x for x, _ in A.children(node)]))  # type: ignore[misc]
    return out


def _is_dim(name: str, fn: A.Function) -> bool:
    return any(p.dims and any(isinstance(d, A.PolyName) and d.name == name for d in p.dims)
               for p in fn.params)


def _input_rank(inputs: Mapping[str, object] | None, name: str) -> int | None:
    if inputs is None or name not in inputs:
        return None
    spec = inputs[name]
    shape = getattr(spec, "shape", None)
    if shape is None and isinstance(spec, tuple) and len(spec) == 2:
        shape = spec[0]
    if shape is None and isinstance(spec, (int, float)):
        return 0
    try:
        return len(tuple(shape))  # type: ignore[arg-type]
    except TypeError:
        return None
