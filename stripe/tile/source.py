"""What the front end accepts as a Tile function: text, or an object that writes Tile.

``stripe.lower``, ``stripe.compile`` and the other entry points take either Tile source (a
``str``) with its ``inputs``, or any object with two attributes:

- ``tile_source``: the Tile text of the function (a ``str``);
- ``tile_inputs``: a mapping from each input's name to a ``(shape, dtype)`` pair.

An object may also have ``tile_program(program)``: ``stripe.compile`` then returns what it
makes of the compiled :class:`~stripe.compiler.Program` (``stripe.onnx`` returns a program
that takes and gives arrays by the model's own names).

The op library's functions (``stripe.ops.function``) are such objects, so everything they
build goes through the same parser, lowering, passes and back end as hand-written Tile.
With an object, ``inputs`` may be omitted (its ``tile_inputs`` are used) or given to override
them (to run the same function on other shapes).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import ArgumentTypeError


def resolve(source: object, inputs: object) -> tuple[str, dict[str, object]]:
    """``(source, inputs)`` as given by a caller -> ``(Tile text, inputs mapping)``.

    Raises :class:`~stripe.errors.ArgumentTypeError` naming the argument when ``source`` is
    neither a ``str`` nor an object with ``tile_source``/``tile_inputs``, or when ``inputs``
    is missing for text or is not a mapping.
    """
    if isinstance(source, str):
        text, default = source, None
    elif isinstance(getattr(source, "tile_source", None), str):
        text = source.tile_source  # type: ignore[attr-defined]
        default = getattr(source, "tile_inputs", None)
        if not isinstance(default, Mapping):
            raise ArgumentTypeError(f"source: {type(source).__name__}.tile_inputs must be a "
                                    f"mapping from input name to (shape, dtype)")
    else:
        raise ArgumentTypeError(f"source must be Tile text (a str) or a function built with "
                                f"stripe.ops, got {type(source).__name__}")
    if inputs is None:
        if default is None:
            raise ArgumentTypeError("inputs must be given with Tile text: a mapping from input "
                                    "name to an array or a (shape, dtype) pair")
        inputs = default
    if not isinstance(inputs, Mapping):
        raise ArgumentTypeError(f"inputs must be a mapping from input name to an array or a "
                                f"(shape, dtype) pair, got {type(inputs).__name__}")
    return text, dict(inputs)
