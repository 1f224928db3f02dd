"""pad: read a padded copy of an input so that the constraints guarding its reads can go.

The classic case is a padded convolution: ``O[x] = +(I[x + i - 1] * F[i])`` runs under
``-1 + i + x >= 0`` and ``N - i - x >= 0``, which keep the reads of ``I`` in bounds. After this
pass the kernel reads ``I_pad``, a copy of ``I`` with a halo of zeros, at ``I_pad[x + i]``, and
runs over its whole box without constraints: the extra points read a zero from the halo,
contribute ``0 * F[i] = 0`` to the sum, and change nothing.

What it does, for every selected kernel ``K`` (a child of some block ``P``) that has
constraints:

1. **Candidates.** The refinements of ``K`` (``refs`` restricts them by name) that it only
   loads, that view a *whole buffer* of ``P`` (an allocation, or a view with zero access and
   the same sizes of one, all the way up: a program buffer seen from ``main``), and whose
   *pad value* is neutral (step 2).
2. **Neutrality** (checked on ``K``'s statements, never assumed from tags). ``K`` must be a
   leaf (no child block, no special) with exactly one store, into a refinement whose
   aggregation is not ``assign``. The pad value is the identity of that aggregation in the
   candidate's dtype: ``add``: 0 (``-0.0`` for floats, since ``x + -0.0 == x`` for every
   ``x``), ``mul``: 1, ``max``: the lowest value (``-inf``), ``min``: the highest (``+inf``).
   The statements are evaluated abstractly with the candidate's loads yielding the pad value
   and every other load unknown; the stored value must come out known and equal to the
   identity of the output's aggregation (after the store's conversion). Known values flow
   through constants, exact ``assign``/``cast``, float ``add``/``sub``/``mul`` of two known
   values (IEEE: ``-inf - -inf`` is NaN), ``mul`` by a zero (always for integers;
   for floats only with ``finite_math``, since ``0 * inf`` is NaN and the sign of the zero
   varies) and ``add``/``sub`` with an infinity (floats, ``finite_math`` only). So
   ``+(I * F)`` pads with 0, ``>(I)`` (max pooling) with ``-inf``, ``>(A + B)`` with ``-inf``
   under ``finite_math``; ``+(A + B)``, ``*(A * B)``, ``=`` and conditionals are refused.
3. **Constraints to drop**, greedily in order: constraint ``c`` joins the dropped set when,
   with the whole set dropped, (a) every refinement that is not a candidate, touched by
   ``K`` (the output, the other inputs), stays in bounds at every level of its view chain,
   and (b) every new point -- one that violates a dropped constraint -- reads at least one
   candidate outside its buffer (so it reads a pad value and contributes the identity).
   Both are decided exactly with the polyhedral bridge over the nested iteration space.
   Constraints that guard the output, or that do not guard a read (``k <= i`` in a
   cumulative sum), stay.
4. **Padding.** Per candidate buffer ``B`` (sizes ``S``), the halo before and after each
   dimension comes from the exact bounds of the candidate accesses over the new domain. A
   buffer that needs no halo is left alone. A buffer whose padded copy would exceed
   ``(1 + max_overhead) * elements``, or that the kernel reads fewer than ``min_reuse``
   times per element of the copy (its points over the copy's elements), is not padded (and
   step 3 is redone without it).

The rewrite, when some constraint can go: ``P`` gets a dense buffer ``B_pad`` (a ``main``
block's view of a new ``tmp`` allocation of the program root, or a new allocation of ``P``
elsewhere), and right before ``K`` two kernels tagged ``kernel`` and ``pad``: ``B_pad_fill``
writes the pad value everywhere, ``B_pad_copy`` copies ``B`` into its interior. ``K`` reads
``B_pad`` through the same refinement names, with accesses shifted by the halo, and loses
the dropped constraints.

Preconditions: valid IR. Postconditions: valid IR with the same meaning (exactly, except
that with ``finite_math`` a float input holding an infinity or a NaN next to a zero-padded
operand can give NaN where the original did not, and the sign of a zero sum may differ);
the rewritten kernel reads in bounds of ``B_pad`` everywhere without the dropped
constraints.

Tags read: ``reqs``/``exclude`` (the kernels), ``program``, ``main``. Tags set: ``kernel``
and ``pad`` on the fill and copy kernels, ``tmp`` on the new root allocations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Union

import numpy as np

from stripe import poly, tags
from stripe.affine import Affine
from stripe.dtypes import DType
from stripe.ir import (
    AggOp,
    Block,
    Constant,
    Index,
    Intrinsic,
    Load,
    RefDir,
    Refinement,
    Special,
    Statement,
    Store,
    TensorShape,
    with_field,
)
from stripe.names import fresh_name
from stripe.target import Target

from .select import Selection, Site, rewrite

NAME = "pad"

PAD_TAG = tags.PAD
"""Tag of the fill and copy kernels this pass inserts."""


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``pad``: the kernels, the inputs that may be padded and the size budget."""

    refs: tuple[str, ...] = ()
    """Names (``into``) of the kernel refinements that may be padded (empty: any input)."""

    max_overhead: float = 0.25
    """Largest growth of a padded copy over its buffer, as a fraction of its elements."""

    min_reuse: float = 0.0
    """Pad a buffer only when the kernel runs at least this many points per element of the
    padded copy: filling and copying it costs about two passes over it, which a kernel that
    reads each element only a few times (a depthwise convolution: 9) does not win back by
    losing its bounds tests, while a dense convolution (hundreds) does."""

    finite_math: bool = True
    """Assume float data is finite: ``0 * x == 0`` and ``-inf + x == -inf``. Without it, only
    pad values that pass through unchanged (``>(I)``, ``+(I)``) are used for floats."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_overhead < 0:
            raise ValueError(f"max_overhead must be >= 0, got {self.max_overhead}")
        if self.min_reuse < 0:
            raise ValueError(f"min_reuse must be >= 0, got {self.min_reuse}")


def run(block: Block, options: Options, target: Target) -> Block:
    """Pad the inputs of every selected kernel whose constraints only guard their reads."""
    new = rewrite(block, Selection(), lambda b, site: _pad_children(b, site, options))
    if new is block or tags.PROGRAM not in block.tags:
        return new
    return _declare_root_tmps(new)


# one parent block ----------------------------------------------------------------------------


class Padding(NamedTuple):
    """How one buffer ``name`` of the parent is padded for one kernel."""

    name: str
    refs: tuple[str, ...]  # the kernel's refinements that read it
    before: tuple[int, ...]
    after: tuple[int, ...]
    value: Union[int, float, bool]


class Plan(NamedTuple):
    """What padding one kernel takes: the constraints to drop and the buffers to pad."""

    dropped: tuple[int, ...]
    paddings: tuple[Padding, ...]


def _pad_children(parent: Block, site: Site, options: Options) -> Block:
    path = site.ancestors + (parent,)
    in_main = (tags.MAIN in parent.tags and site.parent is not None
               and tags.PROGRAM in site.parent.tags)
    taken = {r.into for r in parent.refs}
    if in_main and site.parent is not None:
        taken |= {r.into for r in site.parent.refs}
    refs: list[Refinement] = []
    stmts: list[Statement] = []
    for s in parent.stmts:
        plan = _plan(path, s, options) if isinstance(s, Block) else None
        if plan is None or not isinstance(s, Block):
            stmts.append(s)
            continue
        for p in plan.paddings:
            name = fresh_name(f"{p.name}_pad", taken)
            taken.add(name)
            buf = _padded_buffer(parent.ref(p.name), name, p, in_main)
            refs.append(buf)
            stmts += [_fill_kernel(buf, p, s), _copy_kernel(parent.ref(p.name), buf, p, s)]
            s = _redirect(s, p, buf)
        stmts.append(_without(s, plan.dropped))
    if not refs:
        return parent
    return parent.replace(refs=parent.refs + tuple(refs), stmts=tuple(stmts))


def _plan(path: tuple[Block, ...], kernel: Block, options: Options) -> Plan | None:
    if not (options.matches(kernel) and kernel.constraints and _is_leaf(kernel)):
        return None
    store = _single_store(kernel)
    if store is None or kernel.ref(store.into).agg_op is AggOp.ASSIGN:
        return None
    values = {}
    for r in kernel.refs:
        if _is_candidate(path, kernel, r, options):
            value = pad_value(kernel, r.into, options.finite_math)
            if value is not None:
                values[r.into] = value
    while values:
        dropped = _drop_set(path, kernel, tuple(values))
        if not dropped:
            return None
        paddings, too_big = _paddings(path, kernel, dropped, values, options)
        if not too_big:
            return Plan(dropped, paddings) if paddings else None
        values = {n: v for n, v in values.items() if kernel.ref(n).from_ not in too_big}
    return None


def _is_leaf(kernel: Block) -> bool:
    return not any(isinstance(s, (Block, Special)) for s in kernel.stmts)


def _single_store(kernel: Block) -> Store | None:
    stores = [s for s in kernel.stmts if isinstance(s, Store)]
    return stores[0] if len(stores) == 1 else None


def _is_candidate(path: tuple[Block, ...], kernel: Block, r: Refinement,
                  options: Options) -> bool:
    if r.is_alloc or not r.dir.reads or (options.refs and r.into not in options.refs):
        return False
    if any(isinstance(s, Store) and s.into == r.into for s in kernel.stmts):
        return False
    parent = path[-1]
    if not parent.has_ref(r.from_):
        return False
    src = parent.ref(r.from_)
    if not (src.is_alloc or src.dir.reads) or not _is_whole_buffer(path, src):
        return False
    # A kernel that also writes the buffer could read its own writes: the copy would not.
    written = {_origin(path, x) for x in kernel.refs if x.dir.writes}
    return _origin(path, r) not in written


def _origin(path: tuple[Block, ...], r: Refinement) -> tuple[int, str]:
    """(depth, name) of the buffer that ``r``, a refinement of a child of ``path[-1]``,
    finally views: up its view chain as far as ``path`` goes."""
    level, name = len(path), r.into
    while level > 0 and not r.is_alloc and path[level - 1].has_ref(r.from_):
        level, name = level - 1, r.from_
        r = path[level].ref(name)
    return level, name


def _is_whole_buffer(path: tuple[Block, ...], r: Refinement) -> bool:
    """True when ``r`` (of ``path[-1]``) is an allocation or views a whole one, through
    views with zero access and equal sizes."""
    level = len(path) - 1
    while not r.is_alloc:
        if level == 0 or not path[level - 1].has_ref(r.from_):
            return False
        up = path[level - 1].ref(r.from_)
        if any(not a.is_zero for a in r.access) or up.shape.sizes != r.shape.sizes:
            return False
        r, level = up, level - 1
    return True


# neutrality ----------------------------------------------------------------------------------

Known = dict[str, np.ndarray]  # scalar -> its value (one element, the scalar's dtype)


def identity(agg: AggOp, dtype: DType) -> Union[int, float, bool] | None:
    """The value ``v`` with ``agg(m, v) == m`` for every ``m`` of ``dtype`` (None: assign)."""
    if agg is AggOp.ADD:
        return -0.0 if dtype.is_float else (False if dtype is DType.BOOL else 0)
    if agg is AggOp.MUL:
        return 1.0 if dtype.is_float else (True if dtype is DType.BOOL else 1)
    if agg in (AggOp.MAX, AggOp.MIN):
        low = agg is AggOp.MAX
        if dtype.is_float:
            return -np.inf if low else np.inf
        if dtype is DType.BOOL:
            return not low
        info = np.iinfo(dtype.np)
        return int(info.min if low else info.max)
    return None


def pad_value(kernel: Block, ref: str, finite_math: bool) -> Union[int, float, bool] | None:
    """The pad value for refinement ``ref`` of ``kernel`` when reading it in every new point
    makes the kernel's single store neutral; None when that cannot be shown."""
    store = _single_store(kernel)
    if store is None:
        return None
    out = kernel.ref(store.into)
    value = identity(out.agg_op, kernel.ref(ref).dtype)
    if value is None:
        return None
    known: Known = {}
    for s in kernel.stmts:
        if isinstance(s, Load) and s.from_ == ref:
            known[s.into] = np.asarray([value], dtype=kernel.ref(ref).dtype.np)
        elif isinstance(s, Constant):
            known[s.name] = np.asarray([s.value]).astype(s.dtype.np)
        elif isinstance(s, Intrinsic) and len(s.outputs) == 1:
            result = _evaluate(s, known, finite_math)
            if result is not None:
                known[s.outputs[0]] = result
    stored = known.get(store.from_)
    converted = None if stored is None else _convert(stored, out.dtype)
    if converted is None or not _is_neutral(converted, out.agg_op, out.dtype, finite_math):
        return None
    return value


def _convert(v: np.ndarray, dtype: DType) -> np.ndarray | None:
    """``v`` converted to ``dtype`` when the conversion is exact, else None."""
    x = v.reshape(-1)[0].item()
    if isinstance(x, float) and not np.isfinite(x):
        return v.astype(dtype.np) if dtype.is_float else None
    with np.errstate(all="ignore"):
        out = v.astype(dtype.np)
    return out if out.reshape(-1)[0].item() == x else None


_IEEE = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


def _evaluate(s: Intrinsic, known: Known, finite_math: bool) -> np.ndarray | None:
    """The value of ``s`` when the rules of the module docstring determine it."""
    args = [None if x not in known else _convert(known[x], s.dtype) for x in s.inputs]
    if s.name in ("assign", "cast") and args and args[0] is not None:
        return args[0]
    if s.name in _IEEE and s.dtype.is_float and all(a is not None for a in args):
        with np.errstate(all="ignore"):  # exact IEEE arithmetic; inf - inf is NaN
            return _IEEE[s.name](*args)  # type: ignore[no-any-return]
    zero = np.zeros(1, dtype=s.dtype.np)
    if s.name == "mul" and (finite_math or not s.dtype.is_float):
        if any(a is not None and a[0] == 0 for a in args):
            return zero
    if s.name in ("add", "sub") and s.dtype.is_float and finite_math and len(args) == 2:
        for k, a in enumerate(args):
            if a is not None and np.isinf(a[0]):
                return -a if s.name == "sub" and k == 1 else a
    return None


def _is_neutral(v: np.ndarray, agg: AggOp, dtype: DType, finite_math: bool) -> bool:
    x = v[0].item()
    if agg is AggOp.ADD and dtype.is_float and not finite_math:
        return x == 0 and bool(np.signbit(v[0]))
    if agg is AggOp.ADD:
        return x == 0
    return x == identity(agg, dtype)


# which constraints go ------------------------------------------------------------------------


def _without(kernel: Block, dropped: Sequence[int]) -> Block:
    return kernel.replace(constraints=tuple(c for k, c in enumerate(kernel.constraints)
                                            if k not in dropped))


def _drop_set(path: tuple[Block, ...], kernel: Block, padded: tuple[str, ...]) -> tuple[int, ...]:
    dropped: tuple[int, ...] = ()
    for k in range(len(kernel.constraints)):
        trial = dropped + (k,)
        if _legal(path, kernel, trial, padded):
            dropped = trial
    return dropped


def _legal(path: tuple[Block, ...], kernel: Block, dropped: tuple[int, ...],
           padded: tuple[str, ...]) -> bool:
    new = _without(kernel, dropped)
    try:
        nest = poly.nested_domain(path + (new,))
        others = [r for r in _touched(kernel) if r.into not in padded]
        if not all(_chain_in_bounds(nest, path + (new,), r) for r in others):
            return False
        return _new_points_read_pad(nest, path, kernel, dropped, padded)
    except ValueError:  # an access depends on an index the context does not bound
        return False


def _touched(kernel: Block) -> list[Refinement]:
    names = {s.from_ for s in kernel.stmts if isinstance(s, Load)}
    names |= {s.into for s in kernel.stmts if isinstance(s, Store)}
    return [r for r in kernel.refs if r.into in names]


def _chain_in_bounds(nest: poly.NestedDomain, path: tuple[Block, ...], r: Refinement) -> bool:
    """Element 0 of ``r`` (of ``path[-1]``) lies inside every refinement of its view chain,
    at every point of ``nest``."""
    chain = [r]
    level = len(path) - 1
    while not chain[0].is_alloc and level > 0 and path[level - 1].has_ref(chain[0].from_):
        level -= 1
        chain.insert(0, path[level].ref(chain[0].from_))
    for k in range(1, len(chain)):
        coords = poly.access_sum(nest, chain, k)
        for c, size in zip(coords, chain[k - 1].shape.sizes):
            b = nest.bounds(c)
            if b is not None and (b[0] < 0 or b[1] > size - 1):
                return False
    return True


def _new_points_read_pad(nest: poly.NestedDomain, path: tuple[Block, ...], kernel: Block,
                         dropped: tuple[int, ...], padded: tuple[str, ...]) -> bool:
    """Every point that violates a dropped constraint reads some padded ref out of its
    buffer: no point violates one while all padded reads stay inside."""
    depth = len(path)
    inside: list[Affine] = []
    for name in padded:
        r = kernel.ref(name)
        sizes = path[-1].ref(r.from_).shape.sizes
        for a, size in zip(r.access, sizes):
            e = nest.expr(depth, a)
            inside += [e, (size - 1) - e]
    for k in dropped:
        violated = -nest.expr(depth, kernel.constraints[k]) - 1
        if nest.sample([violated] + inside) is not None:
            return False
    return True


# how much padding ----------------------------------------------------------------------------


def _paddings(path: tuple[Block, ...], kernel: Block, dropped: tuple[int, ...],
              values: dict[str, Union[int, float, bool]], options: Options,
              ) -> tuple[tuple[Padding, ...], set[str]]:
    """The paddings the new domain needs, and the buffers over the overhead budget."""
    nest = poly.nested_domain(path + (_without(kernel, dropped),))
    groups: dict[str, list[str]] = {}
    for name in values:
        groups.setdefault(kernel.ref(name).from_, []).append(name)
    out: list[Padding] = []
    too_big: set[str] = set()
    for buf, names in groups.items():
        sizes = path[-1].ref(buf).shape.sizes
        before, after = _halo(nest, len(path), [kernel.ref(n) for n in names], sizes)
        if not any(before) and not any(after):
            continue
        padded = int(np.prod([s + a + b for s, a, b in zip(sizes, before, after)]))
        if (padded > (1 + options.max_overhead) * int(np.prod(sizes))
                or kernel.work < options.min_reuse * padded):
            too_big.add(buf)
            continue
        out.append(Padding(buf, tuple(names), before, after, values[names[0]]))
    return tuple(out), too_big


def _halo(nest: poly.NestedDomain, depth: int, refs: Sequence[Refinement],
          sizes: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    before, after = [0] * len(sizes), [0] * len(sizes)
    for r in refs:
        for d, a in enumerate(r.access):
            b = nest.bounds(nest.expr(depth, a))
            if b is not None:
                before[d] = max(before[d], -b[0])
                after[d] = max(after[d], b[1] - (sizes[d] - 1))
    return tuple(before), tuple(after)


# the rewrite ---------------------------------------------------------------------------------


def _padded_buffer(src: Refinement, name: str, p: Padding, in_main: bool) -> Refinement:
    sizes = tuple(s + a + b for s, a, b in zip(src.shape.sizes, p.before, p.after))
    shape = TensorShape.packed(src.dtype, sizes)
    zeros = tuple(Affine() for _ in sizes)
    if in_main:  # the program root gets the allocation (see _declare_root_tmps)
        return Refinement(RefDir.INOUT, name, name, zeros, shape)
    return Refinement(RefDir.NONE, "", name, zeros, shape)


def _unit_view(dir: RefDir, src: str, into: str, access: tuple[Affine, ...],
               parent: Refinement) -> Refinement:
    return Refinement(dir, src, into, access, parent.shape.with_sizes((1,) * len(access)))


def _loop(sizes: tuple[int, ...]) -> tuple[tuple[Index, ...], tuple[Affine, ...]]:
    """Indexes ``i<d>`` over every dimension of size > 1, and the access they make."""
    idxs = tuple(Index(f"i{d}", n) for d, n in enumerate(sizes) if n > 1)
    access = tuple(Affine.of(f"i{d}") if n > 1 else Affine() for d, n in enumerate(sizes))
    return idxs, access


def _fill_kernel(buf: Refinement, p: Padding, kernel: Block) -> Block:
    idxs, access = _loop(buf.shape.sizes)
    return Block(
        name=f"{buf.into}_fill", comments=f"pad {p.name} for {kernel.name}: fill", idxs=idxs,
        refs=(_unit_view(RefDir.OUT, buf.into, buf.into, access, buf),),
        stmts=(Constant("$pad", p.value, buf.dtype), Store("$pad", buf.into)),
        tags=frozenset({tags.KERNEL, PAD_TAG}))


def _copy_kernel(src: Refinement, buf: Refinement, p: Padding, kernel: Block) -> Block:
    idxs, access = _loop(src.shape.sizes)
    shifted = tuple(a + k for a, k in zip(access, p.before))
    return Block(
        name=f"{buf.into}_copy", comments=f"pad {p.name} for {kernel.name}: copy", idxs=idxs,
        refs=(_unit_view(RefDir.IN, src.into, src.into, access, src),
              _unit_view(RefDir.OUT, buf.into, buf.into, shifted, buf)),
        stmts=(Load(src.into, "$x"), Store("$x", buf.into)),
        tags=frozenset({tags.KERNEL, PAD_TAG}))


def _redirect(kernel: Block, p: Padding, buf: Refinement) -> Block:
    """``kernel`` reading ``buf`` instead of ``p.name``, accesses shifted by the halo."""
    refs = []
    for r in kernel.refs:
        if r.into in p.refs:
            r = with_field(r, from_=buf.into,
                           access=tuple(a + k for a, k in zip(r.access, p.before)),
                           shape=buf.shape.with_sizes(r.shape.sizes))
        refs.append(r)
    return kernel.replace(refs=tuple(refs))


def _declare_root_tmps(root: Block) -> Block:
    """Give every view that a child of the program root makes of a missing buffer (the
    padded copies made in ``main``) a ``tmp`` allocation."""
    new: list[Refinement] = []
    for child in root.sub_blocks:
        for v in child.refs:
            if not v.is_alloc and not root.has_ref(v.from_):
                new.append(Refinement(RefDir.NONE, "", v.from_, v.access, v.shape,
                                      tags=frozenset({tags.TMP})))
    return root.replace(refs=root.refs + tuple(new)) if new else root


__all__ = ["NAME", "Options", "PAD_TAG", "Padding", "Plan", "identity", "pad_value", "run"]
