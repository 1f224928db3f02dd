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
