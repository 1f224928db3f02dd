"""Placeholder: being written."""


def parse_ir(*args, **kwargs):  # type: ignore[no-untyped-def]
    raise NotImplementedError("parse_ir")
