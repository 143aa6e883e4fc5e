"""Settings that say what their values mean: one rule per field, checked on construction.

Every field of a settings dataclass (scenarios and their parts, policy configs) carries exactly
one :class:`Rule` in its annotation, and the class derives from :class:`Settings`, whose
``__post_init__`` checks them all::

    @dataclass(frozen=True)
    class SimConfig(Settings):
        sample_s: Annotated[float, Num(ge=0)] = 300.0

A value that breaks its rule raises :class:`SettingError` (a ``ValueError``) naming the class, the
field, the rule and the value; ``--set`` reports it as ``setting 'sim.sample_s=-1' must be >= 0.``
Rules that tie several fields together stay in the class's own ``__post_init__`` (after
``super().__post_init__()``). tests/test_settings.py walks every settings class and fails on a
field without a rule, so a new field cannot be added without saying what it may hold.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Check",
    "Choice",
    "Each",
    "Flag",
    "Items",
    "Names",
    "Num",
    "Rule",
    "SettingError",
    "Settings",
    "Span",
    "Text",
    "rules_of",
]


class SettingError(ValueError):
    """A settings value that breaks its field's rule."""

    def __init__(self, owner: str, name: str, rule: Rule, value: Any) -> None:
        self.owner, self.name, self.rule, self.value = owner, name, rule, value
        super().__init__(f"{owner}.{name} {rule.text}, got {value!r}")


class Rule:
    """What a field may hold. ``text`` completes "<field> ..." (``"must be > 0"``); ``bad`` is a
    command-line value that breaks the rule (``None``: every value of the field's type is valid)."""

    text: str = ""
    bad: str | None = None
    good: str = ""

    def ok(self, value: Any) -> bool:
        raise NotImplementedError


@dataclass(frozen=True)
class Num(Rule):
    """A number within bounds: ``ge``/``gt`` below, ``le``/``lt`` above (``inf`` passes an
    open upper bound; ``nan`` never passes)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def ok(self, value: Any) -> bool:
        if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
            return False
        return (
            (self.ge is None or value >= self.ge)
            and (self.gt is None or value > self.gt)
            and (self.le is None or value <= self.le)
            and (self.lt is None or value < self.lt)
        )

    @property
    def text(self) -> str:  # type: ignore[override]
        lo = f"[{_n(self.ge)}" if self.ge is not None else f"({_n(self.gt)}" if self.gt is not None else None
        hi = f"{_n(self.le)}]" if self.le is not None else f"{_n(self.lt)})" if self.lt is not None else None
        if lo and hi:
            return f"must be in {lo}, {hi}"
        if lo:
            return f"must be {'>=' if self.ge is not None else '>'} {lo[1:]}"
        if hi:
            return f"must be {'<=' if self.le is not None else '<'} {hi[:-1]}"
        return "must be a number"

    @property
    def bad(self) -> str:  # type: ignore[override]
        if self.ge is not None:
            return _n(self.ge - 1)
        if self.gt is not None:
            return _n(self.gt)
        if self.le is not None:
            return _n(self.le + 1)
        if self.lt is not None:
            return _n(self.lt)
        return "nan"

    @property
    def good(self) -> str:  # type: ignore[override]
        lo = self.ge if self.ge is not None else self.gt
        hi = self.le if self.le is not None else self.lt
        if lo is not None and hi is not None:
            whole = float(lo).is_integer() and float(hi).is_integer() and hi - lo >= 2
            return _n((lo + hi) // 2 if whole else (lo + hi) / 2)
        if lo is not None:
            return _n(lo + 1)
        return _n(hi - 1) if hi is not None else "1"


def _n(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class Choice(Rule):
    """One of a fixed set of words."""

    values: tuple[str, ...]

    def ok(self, value: Any) -> bool:
        return value in self.values

    @property
    def text(self) -> str:  # type: ignore[override]
        return f"must be one of {', '.join(self.values)}"

    bad = "nonexistent"

    @property
    def good(self) -> str:  # type: ignore[override]
        return self.values[0]


@dataclass(frozen=True)
class Names(Rule):
    """A name from a set known at run time (``what`` names the set: ``"GPU type"``)."""

    what: str
    known: Callable[[], Iterable[str]]

    def ok(self, value: Any) -> bool:
        return value in set(self.known())

    @property
    def text(self) -> str:  # type: ignore[override]
        return f"must be a known {self.what} ({', '.join(sorted(self.known()))})"

    bad = "nonexistent"

    @property
    def good(self) -> str:  # type: ignore[override]
        return sorted(self.known())[0]


@dataclass(frozen=True)
class Text(Rule):
    """Free text: every string means something (a name, a path the loader checks, a prefix)."""

    why: str = ""

    def ok(self, value: Any) -> bool:
        return isinstance(value, str)

    text = "must be text"
    good = "x"


@dataclass(frozen=True)
class Flag(Rule):
    """True or false."""

    def ok(self, value: Any) -> bool:
        return isinstance(value, bool)

    text = "must be true or false"
    bad = "maybe"
    good = "true"


@dataclass(frozen=True)
class Each(Rule):
    """Every item of a tuple or set satisfies ``item``; ``min_items``: at least this many."""

    item: Rule
    min_items: int = 0
    say: str = ""

    def ok(self, value: Any) -> bool:
        return len(value) >= self.min_items and all(self.item.ok(v) for v in value)

    @property
    def text(self) -> str:  # type: ignore[override]
        if self.say:
            return self.say
        need = f"at least {self.min_items} item(s), each of which " if self.min_items else "items that each "
        return f"must hold {need}{self.item.text.removeprefix('must ')}"

    @property
    def bad(self) -> str | None:  # type: ignore[override]
        return self.item.bad

    @property
    def good(self) -> str:  # type: ignore[override]
        return self.item.good


@dataclass(frozen=True)
class Items(Rule):
    """A fixed-length tuple whose i-th item satisfies ``rules[i]``."""

    rules: tuple[Rule, ...]

    def ok(self, value: Any) -> bool:
        return len(value) == len(self.rules) and all(r.ok(v) for r, v in zip(self.rules, value, strict=True))

    @property
    def text(self) -> str:  # type: ignore[override]
        parts = "; ".join(f"item {i + 1} {r.text.removeprefix('must ')}" for i, r in enumerate(self.rules))
        return f"must have {len(self.rules)} items ({parts})"

    @property
    def bad(self) -> str | None:  # type: ignore[override]
        for i, r in enumerate(self.rules):
            if r.bad is not None:
                return ":".join(r.bad if k == i else q.good for k, q in enumerate(self.rules))
        return None

    @property
    def good(self) -> str:  # type: ignore[override]
        return ":".join(r.good for r in self.rules)


@dataclass(frozen=True)
class Span(Rule):
    """A ``(lo, hi)`` pair with ``lo <= hi``, both satisfying ``bound``."""

    bound: Num

    def ok(self, value: Any) -> bool:
        return len(value) == 2 and self.bound.ok(value[0]) and self.bound.ok(value[1]) and value[0] <= value[1]

    @property
    def text(self) -> str:  # type: ignore[override]
        return f"must be a range lo;hi with lo <= hi, both {self.bound.text.removeprefix('must be ')}"

    @property
    def bad(self) -> str:  # type: ignore[override]
        return f"{self.bound.bad};{self.bound.good}"

    @property
    def good(self) -> str:  # type: ignore[override]
        return f"{self.bound.good};{self.bound.good}"


@dataclass(frozen=True)
class Check(Rule):
    """A rule of its own: ``test(value)``, described by ``text``, broken by ``bad``."""

    test: Callable[[Any], bool]
    text: str  # type: ignore[misc]
    bad: str | None  # type: ignore[misc]
    good: str = ""

    def ok(self, value: Any) -> bool:
        return bool(self.test(value))


def rules_of(cls: type) -> tuple[tuple[str, Rule | None], ...]:
    """(field, its rule or None) for every dataclass field of ``cls``, in field order."""
    return _rules_of(cls)


@functools.cache
def _rules_of(cls: Any) -> tuple[tuple[str, Rule | None], ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for f in dataclasses.fields(cls):
        rules = [m for m in getattr(hints[f.name], "__metadata__", ()) if isinstance(m, Rule)]
        out.append((f.name, rules[0] if rules else None))
    return tuple(out)


class Settings:
    """Base of the settings dataclasses: ``__post_init__`` checks every field's rule (a ``None``
    value passes: it means "not set" where a field's type allows it)."""

    def __post_init__(self) -> None:
        cls = type(self)
        for name, rule in rules_of(cls):
            value = getattr(self, name)
            if rule is not None and value is not None and not rule.ok(value):
                raise SettingError(cls.__name__, name, rule, value)
