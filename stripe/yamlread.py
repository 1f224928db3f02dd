"""Strict YAML reading: values with the file and line they were written at, and their
conversion to typed option values.

:class:`YamlFile` reads one file's node tree, every error a :class:`ConfigError` naming the
file and the line; :class:`YamlValue` keeps a value with its place until its type is known,
and :func:`convert` reads it as an option type (``bool``, ``int``, ``float``, ``str``,
``Literal`` of strings, ``tuple[T, ...]``, ``T | None`` and frozen dataclasses of those,
:func:`check_option_type`). The config schema and its merging are :mod:`stripe.config`.

Reading is bounded (``docs/hwconfigs.md``, "Limits"): a file of at most
:data:`MAX_FILE_BYTES` bytes of UTF-8 without NUL bytes, values nested at most
:data:`MAX_NESTING` levels deep, at most :data:`MAX_VALUES` values once aliases are expanded,
integers within 64 bits (:data:`stripe.limits.INT_MIN` .. :data:`stripe.limits.INT_MAX`) and
floats finite. Messages quote a value of the file only as a short excerpt
(:data:`MAX_SHOWN` characters).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from .errors import StripeError
from .limits import INT_MAX, INT_MIN

MAX_FILE_BYTES = 1 << 20
"""The largest config file read, in bytes (1 MiB)."""
MAX_NESTING = 32
"""The deepest nesting of lists and mappings in a file (the top-level mapping is level 1)."""
MAX_VALUES = 100_000
"""The most values (scalars, lists and mappings, keys included) a file may hold once its
aliases are expanded: an alias counts as a copy of what it refers to."""
MAX_SHOWN = 40
"""The most characters of a value a message quotes."""
INT_RANGE = f"{INT_MIN} .. {INT_MAX}"
"""The integers a file may hold (64-bit signed), as messages show them."""

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
        return _shown(self.value)


# YAML nodes with their lines -----------------------------------------------------------------

# libyaml's parser when PyYAML was built with it (the same nodes and line marks, several times
# faster: parsing the shipped configs in pure Python would be most of a warm compile)
_C_LOADER = getattr(yaml, "CSafeLoader", None)
_LOADER = _C_LOADER or yaml.SafeLoader
_SCAN_FROM = 1 << 16
"""Texts longer than this (in characters) are scanned for the limits before composing:
composing takes several times longer than parsing, and a file this small composes fast."""
TOP = "the config"
"""What messages call a file's top-level mapping (an unknown key there is named bare)."""


class YamlFile:
    """Typed reading of one file's YAML node tree; every error names the file and line."""

    def __init__(self, path: str) -> None:
        self.path = path
        # one per file: a constructor caches every node it has built
        self._constructor = SafeConstructor()

    def error(self, node: yaml.Node | None, message: str, choices: Sequence[str] = (),
              kind: str = "choices") -> ConfigError:
        line = node.start_mark.line + 1 if node is not None else None
        return ConfigError(message, self.path, line, choices, kind)

    def decode(self, data: bytes) -> str:
        """The text of a file's bytes: ConfigError (with the line of the offending byte)
        when it is larger than :data:`MAX_FILE_BYTES`, holds a NUL byte or is not UTF-8."""
        if len(data) > MAX_FILE_BYTES:
            raise ConfigError(f"the file is larger than the limit of {MAX_FILE_BYTES} bytes",
                              self.path)
        nul = data.find(b"\0")
        if nul >= 0:
            raise ConfigError("the file holds a NUL byte (not a text file)", self.path,
                              data.count(b"\n", 0, nul) + 1)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConfigError("the file is not valid UTF-8", self.path,
                              data.count(b"\n", 0, e.start) + 1) from None

    def compose(self, text: str) -> yaml.Node | None:
        """The YAML node tree of ``text``, checked against the nesting and size limits."""
        try:
            if len(text) > _SCAN_FROM or _LOADER is not _C_LOADER:
                self._scan(text)
            root = yaml.compose(text, Loader=_LOADER)
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            line = mark.line + 1 if mark is not None else None
            raise ConfigError(f"YAML syntax error: {excerpt(str(e.problem or e), 100)}", self.path,
                              line) from None
        except yaml.reader.ReaderError as e:
            # libyaml counts bytes of the UTF-8 text, PyYAML's reader characters
            before = (text.encode("utf-8")[:e.position].count(b"\n") if _LOADER is _C_LOADER
                      else text.count("\n", 0, e.position))
            line = before + 1
            code = e.character if isinstance(e.character, int) else ord(e.character)
            raise ConfigError(f"YAML error: character #x{code:04x} is not allowed", self.path,
                              line) from None
        except yaml.YAMLError as e:
            raise ConfigError(f"YAML error: {excerpt(str(e), 100)}", self.path) from None
        except RecursionError:  # a safety net: the scan above bounds the composer's recursion
            raise ConfigError(f"values are nested more than {MAX_NESTING} levels deep",
                              self.path) from None
        if root is not None:
            self._check_tree(root)
        return root

    def _scan(self, text: str) -> None:
        """ConfigError at the first YAML event past :data:`MAX_NESTING` levels or
        :data:`MAX_VALUES` values (aliases counted once), before anything is composed: the
        parser is a state machine, so this bounds the time a large file takes and the
        recursion of PyYAML's pure-Python composer."""
        depth = count = 0
        for event in yaml.parse(text, Loader=_LOADER):
            if isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
                continue
            if not isinstance(event, yaml.NodeEvent):
                continue
            count += 1
            if count > MAX_VALUES:
                raise ConfigError(f"the file holds more than {MAX_VALUES} values", self.path,
                                  event.start_mark.line + 1)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_NESTING:
                    raise ConfigError(f"values are nested more than {MAX_NESTING} levels deep",
                                      self.path, event.start_mark.line + 1)

    def _check_tree(self, root: yaml.Node) -> None:
        """ConfigError when the tree nests deeper than :data:`MAX_NESTING` or holds more than
        :data:`MAX_VALUES` values with its aliases expanded (an alias to an enclosing node
        nests without end). Iterative, and stops at the first excess."""
        stack: list[tuple[yaml.Node, int]] = [(root, 1)]
        count = 0
        while stack:
            node, depth = stack.pop()
            count += 1
            if count > MAX_VALUES:
                raise self.error(node, f"the file holds more than {MAX_VALUES} values with its "
                                 f"aliases expanded")
            if isinstance(node, yaml.ScalarNode):
                continue
            if depth > MAX_NESTING:
                raise self.error(node, f"values are nested more than {MAX_NESTING} levels "
                                 f"deep")
            if isinstance(node, yaml.SequenceNode):
                stack.extend((n, depth + 1) for n in node.value)
            else:
                for key, value in node.value:
                    stack.append((key, depth + 1))
                    stack.append((value, depth + 1))

    def mapping(self, node: yaml.Node, what: str, valid: Sequence[str],
                required: Sequence[str] = ()) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{what} must be a mapping, got {_shown(self.scalar(node))}")
        out: dict[str, yaml.Node] = {}
        for key_node, value in node.value:
            key = self.scalar(key_node)
            where = f" in {what}" if what != TOP else ""
            if not isinstance(key, str):
                raise self.error(key_node, f"a key{where} must be a string, got {_shown(key)}",
                                 sorted(valid), "keys")
            if key not in valid:
                raise self.error(key_node, f"unknown key '{excerpt(key)}'{where}",
                                 sorted(valid), "keys")
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
        """A scalar node's value; a mapping or list node is returned as the node itself. An
        integer outside 64 bits, a non-finite float or a value no constructor reads raises
        ConfigError."""
        if not isinstance(node, yaml.ScalarNode):
            return node
        if node.tag == "tag:yaml.org,2002:merge":
            raise self.error(node, "YAML merge keys ('<<') are not supported")
        if node.tag == "tag:yaml.org,2002:int" and _too_many_digits(node.value):
            raise self.error(node, "the integer is out of range", [INT_RANGE], "range")
        try:
            value = self._constructor.construct_object(node)
        except ConstructorError as e:
            raise self.error(node, f"bad value: {excerpt(str(e.problem))}") from None
        except (ValueError, TypeError, OverflowError) as e:  # !!int abc, a 30 February
            raise self.error(node, f"bad value for the tag {excerpt(node.tag)}: "
                             f"{excerpt(str(e), 80)}") from None
        if isinstance(value, int) and not isinstance(value, bool):
            if not INT_MIN <= value <= INT_MAX:
                raise self.error(node, "the integer is out of range", [INT_RANGE], "range")
        elif isinstance(value, float) and not math.isfinite(value):
            raise self.error(node, f"a number must be finite, got {value}")
        return value

    def string(self, node: yaml.Node, what: str) -> str:
        value = self.scalar(node)
        if not isinstance(value, str) or not value:
            raise self.error(node, f"{what} must be a non-empty string, got {_shown(value)}")
        return value

    def integer(self, node: yaml.Node, what: str, minimum: int = 1,
                maximum: int | None = None) -> int:
        """An integer from ``minimum`` to ``maximum`` (default: 64 bits); the message of a
        value out of range gives the range."""
        value = self.scalar(node)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(node, f"{what} must be an integer, got {_shown(value)}")
        top = INT_MAX if maximum is None else maximum
        if not minimum <= value <= top:
            bound = f">= {minimum}" if value < minimum else f"<= {top}"
            raise self.error(node, f"{what} must be {bound}, got {value}",
                             [f"{minimum} .. {top}"], "range")
        return value

    def size(self, node: yaml.Node, what: str) -> int:
        """Bytes: an integer, or a string ``<int> <unit>`` such as ``32KiB`` or ``1 MiB``."""
        value = self.scalar(node)
        if isinstance(value, str):
            m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", value)
            if m is None or (m.group(2) and m.group(2) not in SIZE_UNITS):
                raise self.error(node, f"{what} '{excerpt(value)}' is not a size",
                                 ["<int>"] + [f"<int>{u}" for u in SIZE_UNITS], "sizes")
            digits = m.group(1).lstrip("0")
            value = (int(digits or "0") if len(digits) <= 19 else INT_MAX + 1) * SIZE_UNITS.get(
                m.group(2), 1)
        elif isinstance(value, bool) or not isinstance(value, int):
            raise self.error(node, f"{what} must be a size like 32KiB, got {_shown(value)}")
        if not 1 <= value <= INT_MAX:
            got = f", got {value}" if value < 1 else ""
            raise self.error(node, f"{what} must be from 1 to {INT_MAX} bytes{got}",
                             [f"1 .. {INT_MAX}"], "range")
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
                    raise key.error(f"duplicate key '{excerpt(key.value)}'")
                seen.add(key.value)
            return YamlValue("mapping", items=pairs, path=self.path, line=line)
        return YamlValue("scalar", self.scalar(node), path=self.path, line=line)


def _shown(value: object) -> str:
    """How a value of the file reads in a message: its type, and a short excerpt."""
    if isinstance(value, yaml.Node):
        return "a mapping" if isinstance(value, yaml.MappingNode) else "a list"
    if value is None:
        return "null"
    return f"{type(value).__name__} {excerpt(repr(value))}"


def excerpt(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` cut to ``limit`` characters (``...`` marks a cut) on one line."""
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _too_many_digits(text: str) -> bool:
    """True when an integer written as ``text`` (YAML 1.1: decimal, ``0b``, ``0x``, octal
    with a leading ``0``, or base 60 with ``:``) is surely beyond 64 bits: more than 64
    significant digits in any base, or 12 or more base-60 parts (the first one is not 0).
    Such text is not converted, since converting very long numbers takes quadratic time."""
    digits = text.replace("_", "").lstrip("+-")
    if ":" in digits:
        parts = digits.split(":")
        return len(parts) >= 12 or any(len(p) > 64 for p in parts)
    for prefix in ("0b", "0x", "0o"):
        digits = digits.removeprefix(prefix)
    return len(digits.lstrip("0")) > 64


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
    hints = _hints(cls)
    names = [f.name for f in fields(cls)]
    kwargs: dict[str, object] = {}
    for key, value in items:
        name = str(key.value)
        if name not in names:
            raise key.error(f"unknown key '{excerpt(name)}' in {what}", sorted(names), "keys")
        kwargs[name] = convert(value, hints[name], value_what.format(key=name, what=what))
    for f in fields(cls):
        if f.name not in kwargs and f.default is MISSING and f.default_factory is MISSING:
            raise _at(where, f"{what} needs the key '{f.name}'")
    try:
        return cls(**kwargs)
    except ValueError as e:
        raise _at(where, f"{label or what}: {e}") from e


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The resolved field types of a dataclass (resolving them compiles each annotation)."""
    return get_type_hints(cls)


def _at(where: YamlValue | ConfigError, message: str) -> ConfigError:
    if isinstance(where, YamlValue):
        return where.error(message)
    return ConfigError(message, where.path, where.line)


__all__ = [
    "INT_RANGE", "MAX_FILE_BYTES", "MAX_NESTING", "MAX_SHOWN", "MAX_VALUES", "SIZE_UNITS",
    "TOP", "ConfigError", "YamlFile", "YamlValue", "build_dataclass",
    "check_option_type", "convert", "excerpt", "type_name",
]
