"""``--set key=value`` overrides on nested dataclasses, typed by the fields they replace."""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from envs.sim.settings import SettingError, rules_of

T = TypeVar("T")


class ConfigError(ValueError):
    """A bad override: unknown key, or a value of the wrong type. One sentence."""


def parse_sets(items: Iterable[str]) -> dict[str, str]:
    """``["a.b=1", "c=x"]`` -> ``{"a.b": "1", "c": "x"}``."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got '{item}'.")
        out[key.strip()] = value.strip()
    return out


def field_names(obj: Any, prefix: str = "") -> list[str]:
    """Every settable dotted key of a (nested) dataclass instance."""
    return [key for key, _, _ in _leaves(obj, prefix)]


def _leaves(obj: Any, prefix: str) -> Iterator[tuple[str, Any, str]]:
    """(dotted key, the dataclass holding it, its field name) for every leaf field of ``obj``."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from _leaves(value, f"{prefix}{f.name}.")
        else:
            yield prefix + f.name, obj, f.name


@dataclass(frozen=True)
class SettingInfo:
    """One ``--set`` key: its type, its value in ``obj`` as ``--set`` writes it, and its rule
    (what it may hold, from :mod:`envs.sim.settings`; empty where the field has none)."""

    key: str
    type: str
    default: str
    rule: str


def describe(obj: Any, prefix: str = "") -> list[SettingInfo]:
    """Every settable dotted key of a (nested) dataclass instance, with type, value and rule."""
    out = []
    for key, owner, name in _leaves(obj, prefix):
        tp = typing.get_type_hints(type(owner))[name]
        rule = dict(rules_of(type(owner))).get(name)
        out.append(SettingInfo(key, type_name(tp), format_value(getattr(owner, name)), rule.text if rule else ""))
    return out


def type_name(tp: Any) -> str:
    """``int``, ``float | None``, ``tuple[tuple[int, float], ...]``: a field's type as written."""
    return tp.__name__ if isinstance(tp, type) and not typing.get_args(tp) else str(tp).replace("typing.", "")


def format_value(value: Any) -> str:
    """``value`` as ``--set`` takes it back (:func:`parse_value`): ``none``, ``true``, items of a
    tuple or set separated by ``;``, the fields of a fixed-length tuple by ``:``."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, frozenset):
        return ";".join(format_value(v) for v in sorted(value))
    if isinstance(value, tuple):
        return ";".join(":".join(map(format_value, v)) if isinstance(v, tuple) else format_value(v) for v in value)
    return str(value)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The CLIs' ``--help``: the description's layout kept, and each option's default appended to
    its help, where it has one that says something (not None, an empty list or a flag's False)
    and the help does not give it already."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        d = action.default
        if not action.option_strings or "default" in text or d in (None, [], argparse.SUPPRESS) or isinstance(d, bool):
            return action.help
        return f"{text} (default: %(default)s)"


def apply_overrides(obj: T, overrides: Mapping[str, str], what: str = "scenario") -> T:
    """A copy of dataclass ``obj`` with dotted keys replaced by parsed values."""
    for key, raw in overrides.items():
        obj = _set(obj, key.split("."), raw, key, what)
    return obj


def _set(obj: Any, path: list[str], raw: str, key: str, what: str) -> Any:
    fields = {f.name: f for f in dataclasses.fields(obj)}
    name = path[0]
    if name not in fields:
        valid = ", ".join(field_names(obj))
        raise ConfigError(f"unknown {what} setting '{key}'; valid settings: {valid}.")
    current = getattr(obj, name)
    if len(path) > 1:
        if not dataclasses.is_dataclass(current):
            raise ConfigError(f"{what} setting '{key}': '{name}' has no sub-settings.")
        return dataclasses.replace(obj, **{name: _set(current, path[1:], raw, key, what)})
    hints = typing.get_type_hints(type(obj))
    value = parse_value(raw, hints[name], key)
    try:
        return dataclasses.replace(obj, **{name: value})
    except ConfigError:
        raise
    except SettingError as e:  # the field's rule (or, if another field's, that one's)
        if e.name == name and e.owner == type(obj).__name__:
            raise ConfigError(f"setting '{key}={raw}' {e.rule.text}.") from None
        raise ConfigError(f"setting '{key}={raw}': {e}.") from None
    except ValueError as e:  # the dataclass's own checks across fields
        raise ConfigError(f"setting '{key}={raw}': {e}") from None


def parse_value(raw: str, tp: Any, key: str) -> Any:
    """Parse ``raw`` as type ``tp`` (bool, int, float, str, Optional, tuples, frozensets). Items of
    a tuple or set are separated by ``,`` or ``;``; the fields of a fixed-length tuple (such as
    ``tuple[int, float]``) by ``:`` as well, so ``((1, 0.6), (2, 0.4))`` reads ``1:0.6;2:0.4``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and raw.lower() in ("none", "null", ""):
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return parse_value(raw, a, key)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"setting '{key}': cannot parse '{raw}'.")
    if origin is tuple and len(args) > 1 and args[-1] is not Ellipsis:  # fixed length
        parts = raw.replace(";", ":").replace(",", ":").split(":")
        if len(parts) != len(args):
            raise ConfigError(f"setting '{key}' expects {len(args)} values, got '{raw}'.")
        return tuple(parse_value(p.strip(), a, key) for p, a in zip(parts, args, strict=True))
    if origin in (tuple, frozenset):
        parts = [p for p in raw.replace(";", ",").split(",") if p.strip()] if raw.strip() else []
        inner = args[0] if args else str
        values = [parse_value(p.strip(), inner, key) for p in parts]
        return tuple(values) if origin is tuple else frozenset(values)
    if tp is bool:
        low = raw.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"setting '{key}' expects true or false, got '{raw}'.")
    if tp is int:
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"setting '{key}' expects an integer, got '{raw}'.") from None
    if tp is float:
        try:
            v = float(raw)
        except ValueError:
            raise ConfigError(f"setting '{key}' expects a number, got '{raw}'.") from None
        if math.isnan(v):
            raise ConfigError(f"setting '{key}' expects a number, got '{raw}'.")
        return v
    if tp is str:
        return raw
    raise ConfigError(f"setting '{key}' cannot be set from the command line.")
