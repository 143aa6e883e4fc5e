"""``--set key=value`` overrides on nested dataclasses, typed by the fields they replace."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from envs.sim.settings import SettingError

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
    names: list[str] = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            names.extend(field_names(value, f"{prefix}{f.name}."))
        else:
            names.append(prefix + f.name)
    return names


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
