"""Placeholder: being written."""


def print_ir(*args, **kwargs):  # type: ignore[no-untyped-def]
    raise NotImplementedError("print_ir")
