"""Tag strings used by the front end, the passes and the back ends, in one place."""

PROGRAM = "program"
MAIN = "main"
KERNEL = "kernel"
CONTRACTION = "contraction"
ELTWISE = "eltwise"
ZERO = "zero"        # initialisation kernel before a partially covered contraction
INIT = "init"        # identity initialisation kernel before a contraction
COPY = "copy"        # copy kernel (``default`` tensors, outputs aliasing inputs)
SPECIAL = "special"  # kernel wrapping a special statement
USER = "user"        # program-level buffer bound to a caller's array
TMP = "tmp"          # program-level temporary buffer


def agg_op_tag(op: str) -> str:
    return f"agg_op_{op}"


def comb_op_tag(op: str) -> str:
    return f"comb_op_{op}"


def eltwise_tag(op: str) -> str:
    return f"eltwise_{op}"
INTERIOR = "interior"  # boundary pass: the constraint-free piece
BOUNDARY = "boundary"  # boundary pass: an edge piece that keeps its guards
PAD = "pad"          # pad pass: the fill and copy kernels of a padded buffer
LAYOUT = "layout"    # transpose pass: ``layout=<order>`` asks for a layout change of a user buffer
THREADS = "threads"  # run the block's leading loops on several threads (OpenMP in C)
TRANSFER = "transfer"  # a copy block between memories (counted by the C back end's stats)
STENCIL = "stencil"    # a block standing for one invocation of a hardware stencil
CACHE_IN = "cache_in"      # cache pass: copy into a local memory
CACHE_OUT = "cache_out"    # cache pass: copy back out of a local memory
CACHE_INIT = "cache_init"  # cache pass: identity initialisation of a local accumulator
UNIT = "unit"              # partition_compute: an index numbering compute units
BANK = "bank"              # partition_memory: an index numbering memory banks
THREAD = "thread"          # threads pass: an index numbering threads
SCHEDULED = "scheduled"    # schedule pass: statements ordered within the memory budget
DOUBLE_BUFFERED = "double_buffered"  # schedule double_buffer: its stages' transfers and
# compute overlap, so every buffer it declares lives over the whole block
STENCIL_IDX_PREFIX = "stencil_"  # stencil pass: ``stencil_<slot>`` on matched indexes
PEAK_TAG = "peak_{loc}={bytes}"                # place: peak bytes used in a memory
WORKING_SET_TAG = "working_set_{loc}={bytes}"  # schedule: working set of a memory
DEPS_TAG = "deps={positions}"                  # schedule: direct predecessors of a statement

# Decisions of the back-end passes, read by the C back end (``docs/codegen.md``): each is a
# ``key=value`` block tag; :func:`value` reads one and :func:`keyed` writes one.
LOOP_ORDER = "loop_order"  # order_loops: ``loop_order=<i>:<j>:...``, the loops outermost first
LANES = "lanes"            # reduce_lanes: ``lanes=<lanes>x<sets>:<view>``, a lane reduction
ROW_ACC = "row_acc"        # accumulate_rows: ``row_acc=<index>:<view>``, a row accumulator
PEEL = "peel"              # peel_alignment: ``peel=<bytes>:<view>``, an aligned split
FRESH_START = "fresh_start"  # start_fresh: the block that starts the next block's fresh views
COLLAPSE = "collapse"      # collapse_threads: ``collapse=<n>``, the parallel leading loops
UNROLL = "unroll"          # stencil: ``unroll=<n>``, the points per iteration of the
# micro-kernel's reduction loop (its stencil's ``unroll``; else ``compute.kernel_unroll``)


SPECIALISED = "specialised"  # front end: ``specialised=<input>:<value>`` on the program, an
# integer input whose value the lowering used as a size or in an index expression


def specialised(tags: frozenset[str]) -> dict[str, int]:
    """The ``specialised=<input>:<value>`` tags of a program: {input name: value}."""
    out: dict[str, int] = {}
    for t in sorted(tags):
        if t.startswith(SPECIALISED + "="):
            name, _, number = t[len(SPECIALISED) + 1:].rpartition(":")
            out[name] = int(number)
    return out


def keyed(key: str, value: object) -> str:
    """The tag ``key=value``."""
    return f"{key}={value}"


def value(tags: frozenset[str], key: str) -> str | None:
    """The value of the tag ``key=...`` in ``tags`` (the first in sorted order), or None."""
    found = sorted(t for t in tags if t.startswith(key + "="))
    return found[0][len(key) + 1:] if found else None


def without(tags: frozenset[str], key: str) -> frozenset[str]:
    """``tags`` without any ``key=...`` tag."""
    return frozenset(t for t in tags if not t.startswith(key + "="))
