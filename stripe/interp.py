"""Placeholder: being written."""


def interpret(*args, **kwargs):  # type: ignore[no-untyped-def]
    raise NotImplementedError("interpret")
