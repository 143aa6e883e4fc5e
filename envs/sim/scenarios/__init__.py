"""Named scenarios: each a :class:`Scenario` dataclass, one small file each in this package.

A scenario fixes the cluster, the inference side, the workload (synthetic or a trace, plus the
samplers for what the trace lacks), the simulator's mechanics and the episode (which window of
jobs, the horizon). Every field can be overridden with ``--set dotted.key=value``. To add one,
drop a module here that calls :func:`register` with a function returning a ``Scenario``.
"""

from __future__ import annotations

import importlib
import pkgutil

from envs.sim.scenarios.base import (
    Built,
    ClusterConfig,
    Scenario,
    WorkloadConfig,
    build,
    get,
    names,
    register,
    shared_throughput,
    simulate,
)

__all__ = [
    "Built",
    "ClusterConfig",
    "Scenario",
    "WorkloadConfig",
    "build",
    "get",
    "names",
    "register",
    "shared_throughput",
    "simulate",
]

for _m in pkgutil.iter_modules(__path__):
    if _m.name != "base":
        importlib.import_module(f"{__name__}.{_m.name}")
