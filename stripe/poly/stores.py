"""Exact checks of who stores where (isl images, not boxes).

* **Whole overwrites** (:func:`stores_into`, :func:`store_image`, :func:`partitions`,
  :func:`writes_every_element`, :func:`overwritten_by_first_use`): where a block and its
  descendants store into a refinement and nothing else touches it, the map from instances
  to the elements they store into, and whether those stores cover a whole buffer (so that
  what it held before is never seen), each element from one instance.
* **Disjointness** (:func:`fresh_instances_disjoint`, :func:`points_disjoint`): whether the
  instances of a block, or the points of an iteration space, touch disjoint elements.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

import islpy as isl

from ..affine import Affine
from ..ir import AggOp, Block, Index, Load, Refinement, Special, Statement, Store
from .domains import Level, NestedDomain, nested_domain, nested_domain_of, scoped_name
from .footprints import Touch, access_sum
from .sets import CTX, MEMO, Space, affine_text, make_set

# whole overwrites -----------------------------------------------------------------------------


def stores_into(block: Block, ref: str, *, aggregating: bool = False) -> list[Touch] | None:
    """Where ``block`` and its descendants (through views of views of its refinement
    ``ref``) store into it: one :class:`Touch` per block holding such stores, in statement
    order (two equal blocks give two). None when something else touches it: a load, a
    special, a view that reads, or (unless ``aggregating``) a store that aggregates into a
    view that is not fresh (a fresh one overwrites: each instance starts its elements at
    the identity)."""
    out: list[Touch] = []
    r = block.ref(ref)
    return out if _stores_only(block, ref, (block,), (r,), out, aggregating) else None


def _stores_only(block: Block, ref: str, path: tuple[Block, ...],
                 chain: tuple[Refinement, ...], out: list[Touch], aggregating: bool) -> bool:
    stores = False
    for s in block.stmts:
        if isinstance(s, Load) and s.from_ == ref:
            return False
        if isinstance(s, Special) and ref in s.inputs + s.outputs:
            return False
        if isinstance(s, Store) and s.into == ref:
            if not (aggregating or chain[-1].agg_op is AggOp.ASSIGN or chain[-1].fresh):
                return False
            stores = True
        elif isinstance(s, Block):
            for view in s.refs:
                if view.from_ != ref:
                    continue
                if view.dir.reads or not view.dir.writes:
                    return False
                if not _stores_only(s, view.into, path + (s,), chain + (view,), out,
                                    aggregating):
                    return False
    if stores:
        out.append(Touch(path, chain, (1,) * chain[-1].shape.rank))
    return True


def store_image(t: Touch, instances: int) -> isl.Map | None:
    """``{ instance -> element }`` of the stores of ``t`` (from :func:`stores_into`): an
    instance is a point of the first ``instances`` blocks of ``t.path`` (0: one instance,
    the whole path), an element the coordinates in the buffer that ``t.refs[0]`` views of
    what the points of the rest of the path store into. None when the path's indexes depend
    on parent values (parameters)."""
    nest = nested_domain(t.path)
    if nest.space.params:
        return None
    outer = {scoped_name(i.name, d) for d in range(instances) for i in t.path[d].idxs}
    return _image(nest, [v for v in nest.space.dims if v in outer], [],
                  access_sum(nest, t.refs, 0))


def _image(nest: NestedDomain, ins: Sequence[str], kept: Sequence[str],
           coords: Sequence[Affine]) -> isl.Map:
    """``{ [ins] -> [kept, coords] }`` over the points of ``nest`` (its other dimensions
    existential): ``ins`` and ``kept`` are dimensions of ``nest``, ``kept`` also among
    ``ins``, and ``coords`` affines of its dimensions."""
    names = nest.space.isl_names()
    inner = [names[v] for v in nest.space.dims if v not in ins]
    outs = [f"o{d}" for d in range(len(coords))]
    conds = [f"{affine_text(c, names)} >= 0" for c in nest.constraints]
    conds += [f"{o} = {affine_text(c, names)}" for o, c in zip(outs, coords)]
    body = " and ".join(conds) if conds else "true"
    if inner:
        body = f"exists ({', '.join(inner)} : {body})"
    dom = ", ".join(names[v] for v in ins)
    rng = ", ".join([names[v] for v in kept] + outs)
    return isl.Map.read_from_str(CTX, f"{{ [{dom}] -> [{rng}] : {body} }}")


@lru_cache(maxsize=MEMO)
def fresh_instances_disjoint(levels: tuple[Level, ...],
                             chain: tuple[Refinement, ...]) -> bool | None:
    """Do the instances of the last level store into disjoint elements of the fresh view
    ``chain[-1]``? ``levels`` run from the root (or any block whose indexes depend on no
    parent value) to the block holding the view; ``chain`` is the refinement chain from the
    buffer's allocation (or the first level's refinement) down to the view. An instance is
    one point of the levels between the allocation's and the view's block; each point of
    the allocation's block (and of those above it) has a buffer of its own, so two
    instances conflict only under the same such point. None when the levels depend on
    parent values (parameters)."""
    nest = nested_domain_of(levels)
    if nest.space.params:
        return None
    first = len(levels) - len(chain)  # the allocation's level
    key = {scoped_name(i.name, d) for d in range(first + 1) for i in levels[d].idxs}
    inst = {scoped_name(i.name, d) for d in range(first + 1, len(levels) - 1)
            for i in levels[d].idxs}
    if not inst:
        return True  # one instance per buffer
    keys = [v for v in nest.space.dims if v in key]
    ins = keys + [v for v in nest.space.dims if v in inst]
    image = _image(nest, ins, keys, access_sum(nest, chain, 0))
    return bool(image.reverse().is_single_valued())


def _box(sizes: Sequence[int]) -> isl.Set:
    """The set ``[0, sizes)``."""
    if not sizes:
        return isl.Set.read_from_str(CTX, "{ [] }")
    return isl.Set.read_from_str(CTX, "{ [" + ", ".join(f"o{d}" for d in range(len(sizes)))
                                 + "] : " + " and ".join(f"0 <= o{d} < {n}"
                                                         for d, n in enumerate(sizes)) + " }")


def writes_every_element(block: Block, ref: str, sizes: Sequence[int]) -> bool:
    """True when ``block`` (its points and its descendants', through views) stores into
    every element of the buffer of shape ``sizes`` that its refinement ``ref`` views (the
    box ``[0, sizes)``, in the coordinates ``ref``'s access is in), only stores (plain, or
    aggregating into fresh views) and never reads it: what the buffer held before is never
    seen.

    Exact (isl: the union of the stores' images is the whole box), for a block whose
    indexes depend on no parent value; otherwise False.
    """
    r = block.ref(ref)
    found = stores_into(block, ref) if not r.dir.reads else None
    if not found or len(sizes) != r.shape.rank:
        return False
    image = None
    for t in found:
        m = store_image(t, 0)
        if m is None:
            return False
        image = m.range() if image is None else image.union(m.range())
    assert image is not None
    return bool(image.is_equal(_box(sizes)))


def partitions(images: Sequence[isl.Map], sizes: Sequence[int]) -> bool:
    """Do the instances of ``images`` (from :func:`store_image`) store into disjoint sets
    of elements (none into an element of another instance, of the same map or of another
    one) that together are the box ``[0, sizes)``?"""
    union = None
    for m in images:
        if not m.reverse().is_single_valued():  # an element of two instances of one map
            return False
        rng = m.range()
        if union is not None and not rng.intersect(union).is_empty():
            return False  # an element of instances of two maps
        union = rng if union is None else union.union(rng)
    return union is not None and bool(union.is_equal(_box(sizes)))


def first_uses(block: Block) -> dict[str, Statement]:
    """For every buffer of ``block`` that a statement touches, the first such statement: a
    child block with a view of it, a load or store of it, a special reading or writing it.
    One pass over the statements."""
    first: dict[str, Statement] = {}
    for s in block.stmts:
        if isinstance(s, Block):
            names: Iterable[str] = (v.from_ for v in s.refs)
        elif isinstance(s, (Load, Store)):
            names = (s.from_, s.into)
        elif isinstance(s, Special):
            names = (*s.inputs, *s.outputs)
        else:
            continue
        for name in names:
            first.setdefault(name, s)
    return first


def overwritten_by_first_use(block: Block, name: str, sizes: Sequence[int],
                             first: Mapping[str, Statement] | None = None) -> bool:
    """Is the first statement of ``block`` that touches its buffer ``name`` (of shape
    ``sizes``) a child block that stores into every element of it and reads none
    (:func:`writes_every_element`)? Then nothing can see what the buffer held before.
    ``first``, when given, is :func:`first_uses` of ``block`` (so that asking for every
    buffer of a block costs one pass over its statements, not one per buffer)."""
    s = (first if first is not None else first_uses(block)).get(name)
    if not isinstance(s, Block):
        return False
    views = [v for v in s.refs if v.from_ == name]
    return len(views) == 1 and writes_every_element(s, views[0].into, sizes)


# disjoint points ----------------------------------------------------------------------------


def points_disjoint(idxs: Sequence[Index], constraints: Sequence[Affine],
                    access: Sequence[Affine], extents: Sequence[int]) -> bool:
    """True when no two distinct points of an iteration space touch a common element.

    The space is ``idxs`` (passed-in affines of outer indexes stay symbolic, as parameters)
    under ``constraints``; each point touches the box ``access(point) + [0, extent)``. For
    every index ``k`` it asks isl for two points with ``x'_k > x_k`` whose boxes overlap in
    every dimension; distinct points differ in some index, so no such pair means disjoint.
    """
    if all(i.range == 1 for i in idxs):
        return True
    first = {i.name: f"a:{i.name}" for i in idxs}
    second = {i.name: f"b:{i.name}" for i in idxs}
    outer = sorted({v for i in idxs for v in i.affine.vars()})
    params = {v: f"p:{v}" for v in outer}
    space = Space(tuple(first.values()) + tuple(second.values()), tuple(params.values()))
    cons: list[Affine] = []
    for names in (first, second):
        for idx in idxs:
            value, base = Affine.of(names[idx.name]), idx.affine.rename(params)
            cons += [value - base, base + (idx.range - 1) - value]
        cons += [c.rename(names) for c in constraints]
    for acc, extent in zip(access, extents):
        diff = acc.rename(first) - acc.rename(second)
        cons += [diff + (extent - 1), (extent - 1) - diff]
    for idx in idxs:
        if idx.range > 1:
            apart = Affine.of(second[idx.name]) - Affine.of(first[idx.name]) - 1
            if not make_set(space, cons + [apart]).is_empty():
                return False
    return True
