"""The polyhedral bridge: every use of islpy in stripe goes through this package.

Dimensions are addressed by index name. Names are mapped to positional isl names (``v0``,
``v1``, ..., parameters ``p0``, ...) so that no index name can collide with isl syntax.
Nothing here is stored in the IR: functions take IR values and return Python values (ints,
tuples, :class:`Box`) or transient isl objects. Results that cost an isl call are memoised
on the immutable IR values they were computed from (bounded LRU tables keyed by blocks,
indexes and affines), so a pass or the verifier may ask again freely.

Callers use this package's names (``from stripe import poly``; ``poly.footprint(...)``).
What each module computes:

* :mod:`.sets` -- **sets over a** :class:`Space` (:func:`make_set`, :func:`is_empty`,
  :func:`dim_bounds`, :func:`affine_bounds`, :func:`implies`, :func:`sample_point`): the
  integer set where every constraint ``affine >= 0`` holds, its emptiness, the integer min
  and max of an affine over it, whether it implies a constraint, and one of its points.
* :mod:`.domains` -- **one block** (:func:`block_domain`, :func:`access_map`): a block's
  iteration domain over its index values and a refinement's access as a map into the parent
  buffer; and **a path of nested blocks** (:func:`nested_domain`, :class:`NestedDomain`,
  :func:`domain_is_empty`, :func:`bounds_in`, :func:`implied_in`,
  :func:`constraint_is_redundant`): the points of all blocks along a path, under the
  ranges, constraints and passed-in relations of all ancestors.
* :mod:`.footprints` -- **footprints** (:func:`touches`, :func:`access_sum`,
  :func:`footprint`, :func:`tile_footprint`): which statements reach a refinement
  (following views down through nested blocks), and the box of buffer elements they
  actually touch, over a whole block or per tile of a candidate tiling.
* :mod:`.stores` -- **exact checks of stores** (:func:`stores_into`, :func:`store_image`,
  :func:`partitions`, :func:`writes_every_element`, :func:`overwritten_by_first_use`,
  :func:`first_uses`, :func:`fresh_instances_disjoint`, :func:`points_disjoint`): whether
  stores overwrite a whole buffer, and whether instances or points touch disjoint elements.
"""

from .domains import (
    AccessMap,
    Level,
    NestedDomain,
    access_map,
    block_domain,
    bounds_in,
    constraint_is_redundant,
    domain_is_empty,
    implied_in,
    inner_name,
    nested_domain,
    nested_domain_of,
    outer_name,
    scoped_name,
)
from .footprints import Box, Touch, access_sum, footprint, tile_footprint, touches
from .sets import (
    Domain,
    Space,
    affine_bounds,
    affine_text,
    dim_bounds,
    implies,
    is_empty,
    make_set,
    sample_point,
)
from .stores import (
    first_uses,
    fresh_instances_disjoint,
    overwritten_by_first_use,
    partitions,
    points_disjoint,
    store_image,
    stores_into,
    writes_every_element,
)

__all__ = [
    "AccessMap", "Box", "Domain", "Level", "NestedDomain", "Space", "Touch", "access_map",
    "access_sum", "affine_bounds", "affine_text", "block_domain", "bounds_in",
    "constraint_is_redundant", "dim_bounds", "domain_is_empty", "first_uses", "footprint",
    "fresh_instances_disjoint", "implied_in", "implies", "inner_name", "is_empty", "make_set",
    "nested_domain", "nested_domain_of", "outer_name", "overwritten_by_first_use",
    "partitions", "points_disjoint", "sample_point", "scoped_name", "store_image",
    "stores_into", "tile_footprint", "touches", "writes_every_element",
]
