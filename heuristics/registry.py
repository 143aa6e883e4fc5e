"""Policy names -> factories. ``make("tiresias", {"round_s": "60"})`` builds a configured policy.

Each policy module of this package registers its own names with :func:`register`; every module
is imported when the registry is first used, so adding a policy is adding one file.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import heuristics
from envs.sim.config import ConfigError, apply_overrides
from envs.sim.policy import Scheduler

NEEDS = ("none", "estimate")
"""The least a policy may need to know of durations (``envs/sim/information.py``): ``none`` (it
acts on attained service, arrival order or progress alone) or ``estimate`` (it ranks or plans by
durations, and takes whatever the run reveals: an estimate, or the truth)."""


@dataclass(frozen=True)
class PolicyEntry:
    """:param factory: builds the policy from its config (or from nothing when ``config`` is None).
    :param config: the policy's config dataclass, whose fields ``--set policy.<field>=v`` sets.
    :param needs: the least information level it can act at (:data:`NEEDS`).
    :param oracle: it sees the truth whatever the run's information level (true durations, true
        machine speeds); named ``oracle-*``, for headroom only, never a baseline."""

    name: str
    factory: Callable[..., Scheduler]
    config: type | None = None
    needs: str = "estimate"
    oracle: bool = False


_ENTRIES: dict[str, PolicyEntry] = {}


def register(
    name: str,
    factory: Callable[..., Scheduler],
    config: type | None = None,
    *,
    needs: str = "estimate",
    oracle: bool = False,
) -> None:
    if name in _ENTRIES:
        raise ValueError(f"policy '{name}' is registered twice")
    if needs not in NEEDS:
        raise ValueError(f"policy '{name}': needs must be one of {NEEDS}, got {needs!r}")
    if oracle != name.startswith("oracle-"):
        raise ValueError(f"policy '{name}': an oracle's name starts with 'oracle-', and only an oracle's")
    _ENTRIES[name] = PolicyEntry(name, factory, config, needs, oracle)


@functools.cache
def _load_all() -> None:
    """Import every policy module of the package (once: each registers its names on import)."""
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
    """A fresh policy instance (policies keep state across decisions: one per run). An oracle's
    instance has ``oracle = True``: the engine then shows it the truth."""
    e = entry(name)
    if e.config is None:
        if overrides:
            raise ConfigError(f"policy '{name}' has no settings; got {', '.join(overrides)}.")
        policy = e.factory()
    else:
        config: Any = e.config()
        if overrides:
            config = apply_overrides(config, overrides, what=f"policy '{name}'")
        policy = e.factory(config)
    if e.oracle:
        policy.name = name
        policy.oracle = True  # type: ignore[attr-defined]
    return policy


def check_information(name: str, level: str) -> None:
    """Raise the user's error if policy ``name`` cannot act at information level ``level``."""
    if level == "none" and entry(name).needs != "none" and not entry(name).oracle:
        able = ", ".join(n for n in names() if _ENTRIES[n].needs == "none")
        raise ConfigError(
            f"policy '{name}' ranks or plans by job durations, which information.level=none does not reveal; "
            f"at none use {able}, or an oracle-* policy to measure headroom."
        )


def config_of(name: str, overrides: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The resolved settings of a policy, for run records."""
    e = entry(name)
    if e.config is None:
        return {}
    return dataclasses.asdict(apply_overrides(e.config(), overrides or {}, what=f"policy '{name}'"))
