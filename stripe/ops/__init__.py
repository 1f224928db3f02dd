"""stripe.ops: a Python op library that writes Tile.

Ops are functions on symbolic tensors (:class:`Tensor`); :func:`function` turns the outputs
into a Tile function that ``stripe.lower`` and ``stripe.compile`` accept::

    from stripe import ops
    x = ops.input("X", (1, 56, 56, 64)); w = ops.input("W", (3, 3, 64, 64))
    b = ops.input("B", (64,))
    y = ops.relu(ops.conv(x, w, strides=1, padding="same") + b)
    fn = ops.function({"Y": y})     # print(fn) shows the Tile
    prog = stripe.compile(fn, target="cpu_avx2")

``core`` holds the tensors, ``emit``, ``function`` and ``gradient``; ``nn`` the
neural-network ops; ``array`` the array ops (docs/ops.md, docs/ops_array.md).
"""

from . import array, core, nn  # noqa: F401
from .array import *  # noqa: F401,F403
from .core import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403

__all__ = [*core.__all__, *nn.__all__, *array.__all__]
