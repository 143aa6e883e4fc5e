"""Policy names -> factories. ``make("tiresias", {"round_s": "60"})`` builds a configured policy.

Each policy module of this package registers its own names with :func:`register`; every module
is imported when the registry is first used, so adding a policy is adding one file.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import heuristics
from envs.sim.config import ConfigError, apply_overrides
from envs.sim.policy import Scheduler


@dataclass(frozen=True)
class PolicyEntry:
    """:param factory: builds the policy from its config (or from nothing when ``config`` is None).
    :param config: the policy's config dataclass, whose fields ``--set policy.<field>=v`` sets."""

    name: str
    factory: Callable[..., Scheduler]
    config: type | None = None


_ENTRIES: dict[str, PolicyEntry] = {}


def register(name: str, factory: Callable[..., Scheduler], config: type | None = None) -> None:
    if name in _ENTRIES:
        raise ValueError(f"policy '{name}' is registered twice")
    _ENTRIES[name] = PolicyEntry(name, factory, config)


def _load_all() -> None:
    for m in pkgutil.iter_modules(heuristics.__path__):
        if m.name not in ("registry", "common"):
            importlib.import_module(f"heuristics.{m.name}")


def names() -> list[str]:
    _load_all()
    return sorted(_ENTRIES)


def entry(name: str) -> PolicyEntry:
    _load_all()
    if name not in _ENTRIES:
        raise ConfigError(f"unknown policy '{name}'; valid policies: {', '.join(names())}.")
    return _ENTRIES[name]


def make(name: str, overrides: Mapping[str, str] | None = None) -> Scheduler:
    """A fresh policy instance (policies keep state across decisions: one per run)."""
    e = entry(name)
    if e.config is None:
        if overrides:
            raise ConfigError(f"policy '{name}' has no settings; got {', '.join(overrides)}.")
        return e.factory()
    config: Any = e.config()
    if overrides:
        config = apply_overrides(config, overrides, what=f"policy '{name}'")
    return e.factory(config)


def config_of(name: str, overrides: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The resolved settings of a policy, for run records."""
    e = entry(name)
    if e.config is None:
        return {}
    return dataclasses.asdict(apply_overrides(e.config(), overrides or {}, what=f"policy '{name}'"))
