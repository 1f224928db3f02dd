"""Strict YAML reading: values with the file and line they were written at, and their
conversion to typed option values.

:class:`YamlFile` reads one file's node tree, every error a :class:`ConfigError` naming the
file and the line; :class:`YamlValue` keeps a value with its place until its type is known,
and :func:`convert` reads it as an option type (``bool``, ``int``, ``float``, ``str``,
``Literal`` of strings, ``tuple[T, ...]``, ``T | None`` and frozen dataclasses of those,
:func:`check_option_type`). The config schema and its merging are :mod:`stripe.config`.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from .errors import StripeError

SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


class ConfigError(StripeError):
    """A configuration file is invalid. Carries ``path``, ``line`` and the valid ``choices``."""

    def __init__(self, message: str, path: str = "", line: int | None = None,
                 choices: Sequence[str] = (), kind: str = "choices") -> None:
        self.bare_message = message
        self.path = path
        self.line = line
        self.choices = tuple(choices)
        text = message
        if path:
            text += f" in {path}"
        if line is not None:
            text += f" line {line}"
        if self.choices:
            text += f"; valid {kind}: {', '.join(self.choices)}"
        super().__init__(text)


@dataclass(frozen=True)
class YamlValue:
    """A value as written in a config file, kept with its place until its type is known.

    ``kind`` is ``scalar`` (``value`` is a str, int, float, bool or None), ``list``
    (``items`` are YamlValues) or ``mapping`` (``items`` are ``(key, value)`` pairs of
    YamlValues, the keys strings). :func:`convert` reads it as a given type.
    """

    kind: Literal["scalar", "list", "mapping"]
    value: object = None
    items: tuple[Any, ...] = ()
    path: str = ""
    line: int | None = None

    def error(self, message: str, choices: Sequence[str] = (),
              kind: str = "choices") -> ConfigError:
        return ConfigError(message, self.path, self.line, choices, kind)

    def shown(self) -> str:
        """How the value reads in a message."""
        if self.kind != "scalar":
            return f"a {self.kind}"
        return "null" if self.value is None else f"{type(self.value).__name__} {self.value!r}"


# YAML nodes with their lines -----------------------------------------------------------------

_CONSTRUCTOR = SafeConstructor()
# libyaml's parser when PyYAML was built with it (the same nodes and line marks, several times
# faster: parsing the shipped configs in pure Python would be most of a warm compile)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
TOP = "the config"
"""What messages call a file's top-level mapping (an unknown key there is named bare)."""


class YamlFile:
    """Typed reading of one file's YAML node tree; every error names the file and line."""

    def __init__(self, path: str) -> None:
        self.path = path

    def error(self, node: yaml.Node | None, message: str, choices: Sequence[str] = (),
              kind: str = "choices") -> ConfigError:
        line = node.start_mark.line + 1 if node is not None else None
        return ConfigError(message, self.path, line, choices, kind)

    def compose(self, text: str) -> yaml.Node | None:
        try:
            return yaml.compose(text, Loader=_LOADER)
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            line = mark.line + 1 if mark is not None else None
            raise ConfigError(f"YAML syntax error: {e.problem or e}", self.path, line) from e

    def mapping(self, node: yaml.Node, what: str, valid: Sequence[str],
                required: Sequence[str] = ()) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{what} must be a mapping, got {_shown(self.scalar(node))}")
        out: dict[str, yaml.Node] = {}
        for key_node, value in node.value:
            key = self.scalar(key_node)
            if not isinstance(key, str) or key not in valid:
                where = f" in {what}" if what != TOP else ""
                raise self.error(key_node, f"unknown key '{key}'{where}", sorted(valid),
                                 "keys")
            if key in out:
                raise self.error(key_node, f"duplicate key '{key}' in {what}")
            out[key] = value
        for key in required:
            if key not in out:
                raise self.error(node, f"{what} needs the key '{key}'")
        return out

    def sequence(self, node: yaml.Node, what: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(node, f"{what} must be a list, got {_shown(self.scalar(node))}")
        return list(node.value)

    def scalar(self, node: yaml.Node) -> object:
        """A scalar node's value; a mapping or list node is returned as the node itself."""
        if not isinstance(node, yaml.ScalarNode):
            return node
        try:
            return _CONSTRUCTOR.construct_object(node)
        except ConstructorError as e:
            raise self.error(node, f"bad value: {e.problem}") from e

    def string(self, node: yaml.Node, what: str) -> str:
        value = self.scalar(node)
        if not isinstance(value, str) or not value:
            raise self.error(node, f"{what} must be a non-empty string, got {_shown(value)}")
        return value

    def integer(self, node: yaml.Node, what: str, minimum: int = 1,
                maximum: int | None = None) -> int:
        value = self.scalar(node)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(node, f"{what} must be an integer, got {_shown(value)}")
        if value < minimum:
            raise self.error(node, f"{what} must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise self.error(node, f"{what} must be <= {maximum}, got {value}")
        return value

    def size(self, node: yaml.Node, what: str) -> int:
        """Bytes: an integer, or a string ``<int> <unit>`` such as ``32KiB`` or ``1 MiB``."""
        value = self.scalar(node)
        if isinstance(value, str):
            m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", value)
            if m is None or (m.group(2) and m.group(2) not in SIZE_UNITS):
                raise self.error(node, f"{what} '{value}' is not a size",
                                 ["<int>"] + [f"<int>{u}" for u in SIZE_UNITS], "sizes")
            value = int(m.group(1)) * SIZE_UNITS.get(m.group(2), 1)
        elif isinstance(value, bool) or not isinstance(value, int):
            raise self.error(node, f"{what} must be a size like 32KiB, got {_shown(value)}")
        if value < 1:
            raise self.error(node, f"{what} must be at least 1 byte, got {value}")
        return value


    def value(self, node: yaml.Node) -> YamlValue:
        """The node's YAML value tree with its lines (a duplicate mapping key is an error)."""
        line = node.start_mark.line + 1
        if isinstance(node, yaml.SequenceNode):
            return YamlValue("list", items=tuple(self.value(n) for n in node.value),
                             path=self.path, line=line)
        if isinstance(node, yaml.MappingNode):
            pairs = tuple((self.value(k), self.value(v)) for k, v in node.value)
            seen: set[object] = set()
            for key, _ in pairs:
                if key.kind != "scalar" or not isinstance(key.value, str):
                    raise key.error(f"a key must be a string, got {key.shown()}")
                if key.value in seen:
                    raise key.error(f"duplicate key '{key.value}'")
                seen.add(key.value)
            return YamlValue("mapping", items=pairs, path=self.path, line=line)
        return YamlValue("scalar", self.scalar(node), path=self.path, line=line)


def _shown(value: object) -> str:
    if isinstance(value, yaml.Node):
        return "a mapping" if isinstance(value, yaml.MappingNode) else "a list"
    return "null" if value is None else f"{type(value).__name__} {value!r}"


# option types --------------------------------------------------------------------------------


def type_name(tp: object) -> str:
    """How an option type reads in messages and in ``stripe passes``."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin is tuple:
        return f"list of {type_name(args[0])}"
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return f"{type_name(rest[0])} or null"
    return getattr(tp, "__name__", str(tp))


def check_option_type(tp: object) -> None:
    """Raise TypeError unless the config loader can read values of type ``tp``: ``bool``,
    ``int``, ``float``, ``str``, ``Literal`` of strings, ``tuple[T, ...]``, ``T | None``,
    and frozen dataclasses whose fields are of such types (read from a YAML mapping)."""
    origin, args = get_origin(tp), get_args(tp)
    if tp in (bool, int, float, str):
        return
    if origin is Literal and all(isinstance(a, str) for a in args):
        return
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return check_option_type(args[0])
    if origin in (Union, types.UnionType) and len(args) == 2 and type(None) in args:
        return check_option_type(next(a for a in args if a is not type(None)))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not tp.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            raise TypeError(f"option type {tp.__name__} must be a frozen dataclass")
        hints = get_type_hints(tp)
        for f in fields(tp):
            check_option_type(hints[f.name])
        return
    raise TypeError(f"unsupported option type {tp!r}")


def convert(value: YamlValue, tp: object, what: str) -> object:
    """``value`` as type ``tp`` (see :func:`check_option_type`), strictly: a value of
    another type raises ConfigError with the file and line where it was written."""
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        if value.kind == "scalar" and value.value is None:
            return None
        return convert(value, next(a for a in args if a is not type(None)), what)
    if origin is tuple:
        if value.kind != "list":
            raise value.error(f"{what} ({type_name(tp)}) must be a list, got {value.shown()}")
        return tuple(convert(v, args[0], f"an element of {what}") for v in value.items)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if value.kind != "mapping":
            raise value.error(f"{what} ({tp.__name__}) must be a mapping, got {value.shown()}")
        return build_dataclass(tp, value.items, what, value)
    if value.kind != "scalar":
        raise value.error(f"{what} must be {type_name(tp)}, got {value.shown()}")
    v = value.value
    if origin is Literal:
        if v not in args:
            raise value.error(f"{what} cannot be {value.shown()}", [str(a) for a in args])
        return v
    ok = {bool: isinstance(v, bool),
          int: isinstance(v, int) and not isinstance(v, bool),
          float: isinstance(v, (int, float)) and not isinstance(v, bool),
          str: isinstance(v, str)}[tp]  # type: ignore[index]
    if not ok:
        raise value.error(f"{what} must be {type_name(tp)}, got {value.shown()}")
    return float(v) if tp is float else v  # type: ignore[arg-type]


def build_dataclass(cls: type, items: Sequence[tuple[YamlValue, YamlValue]], what: str,
                    where: YamlValue | ConfigError, value_what: str = "'{key}' of {what}",
                    label: str | None = None) -> Any:
    """An instance of the dataclass ``cls`` from YAML ``(key, value)`` pairs: every key a
    field, every value converted to the field's type, every field without a default given.
    A ``ValueError`` of the class's ``__post_init__`` becomes a ConfigError at ``where`` (a
    value, or a ConfigError that carries the place), its message prefixed by ``label``
    (default ``what``). ``value_what`` names a value in messages."""
    hints = get_type_hints(cls)
    names = [f.name for f in fields(cls)]
    kwargs: dict[str, object] = {}
    for key, value in items:
        name = str(key.value)
        if name not in names:
            raise key.error(f"unknown key '{name}' in {what}", sorted(names), "keys")
        kwargs[name] = convert(value, hints[name], value_what.format(key=name, what=what))
    for f in fields(cls):
        if f.name not in kwargs and f.default is MISSING and f.default_factory is MISSING:
            raise _at(where, f"{what} needs the key '{f.name}'")
    try:
        return cls(**kwargs)
    except ValueError as e:
        raise _at(where, f"{label or what}: {e}") from e


def _at(where: YamlValue | ConfigError, message: str) -> ConfigError:
    if isinstance(where, YamlValue):
        return where.error(message)
    return ConfigError(message, where.path, where.line)


__all__ = [
    "SIZE_UNITS", "TOP", "ConfigError", "YamlFile", "YamlValue", "build_dataclass",
    "check_option_type", "convert", "type_name",
]
