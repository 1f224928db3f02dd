"""The transforms library: the mechanisms that several passes share, below the passes.

A pass module decides *where* and *how much* (its cost model, its options); the library
does the rewriting and the measuring that several passes need, each function with a
contract (what it does, what it requires, what it guarantees):

* :mod:`.tile` -- applying a tile (an outer block over tiles holding an inner block over one
  tile) and the fresh views a tiling would cut;
* :mod:`.footprint` -- cache lines and contiguous runs of a box of elements;
* :mod:`.parts` -- choosing the parts of a block shared among units (cores, processing
  elements, banks) and splitting it into them;
* :mod:`.stencils` -- hardware stencils and matching them to blocks;
* :mod:`.layout` -- strides: which indexes reduce, unit-stride walks, dense boxes,
  restriding the views below a block;
* :mod:`.placement` -- statement uses, lifetimes and alignment for placing buffers;
* :mod:`.fusion_legality` -- how a fusion group's indexes follow the fused block's, and the
  checks that running the group point by point keeps its semantics;
* :mod:`.fusion_rewrite` -- building the fused block: members placed inside it, its views,
  single-point members inlined;
* :mod:`.substitute` -- replacing a block's index names by affines.

Fresh names come from the core (:func:`stripe.names.fresh_name`), which the front end
shares.

Layering: the library imports the IR layer (``stripe.*``), the pass infrastructure
(:mod:`stripe.passes.select`) and itself, never a pass module; a pass module imports the
library and the infrastructure, never another pass module (``tests/test_layers.py``).
"""
