"""The Tile front end: PlaidML's Tile language, parsed and lowered to a Stripe program.

``lower(source, inputs)`` parses ``source`` (``parser``), binds dimension sizes from
``inputs`` (``shapes``), types elementwise expressions (``typecheck``), infers contraction
index ranges (``ranges``) and emits the ``program`` block (``lower``). See ``docs/tile.md``.
"""

from .lower import lower
from .parser import parse

__all__ = ["lower", "parse"]
