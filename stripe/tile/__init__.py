"""Placeholder: the Tile front end is being written."""


def lower(*args, **kwargs):  # type: ignore[no-untyped-def]
    raise NotImplementedError("lower")
