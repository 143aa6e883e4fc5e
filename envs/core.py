"""What the RL adapters share: one simulator episode driven decision by decision.

A :class:`Core` owns an :class:`~envs.sim.engine.Engine` and the heuristic components that no
agent controls (chosen by name: placement, scaling, reclaim, preemption). At every decision
point it runs exactly the loop of :class:`~envs.sim.policy.ComposedScheduler` with the ordering
seat left open: the preemption component acts first, then jobs are started one at a time (by an
agent, or by an expert) until "advance", then the scaling component acts and time runs to the
next decision point. Decision points where no visible job can start are skipped (their scaling
still runs), so every step the agent sees is a real choice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envs.sim import scenarios
from envs.sim.config import ConfigError
from envs.sim.engine import Engine, SimResult
from envs.sim.metrics import summarize
from envs.sim.policy import Action, ComposedScheduler, JobStatus, NoPreemption, Start
from heuristics import registry

REWARDS = ("jct", "slowdown", "fee", "deadline")


def composed(name: str) -> ComposedScheduler:
    """A fresh instance of heuristic ``name``, which must be built from components."""
    policy = registry.make(name)
    if not isinstance(policy, ComposedScheduler):
        raise ConfigError(
            f"policy '{name}' is not built from ordering/placement/scaling components, so it cannot serve as one; "
            f"component policies: {', '.join(n for n in registry.names() if isinstance(registry.make(n), ComposedScheduler))}."
        )
    return policy


@dataclass(frozen=True)
class CoreConfig:
    """:param scenario: scenario name; ``overrides``: its ``--set`` pairs; ``trace``: a CSV to
    replay (implies the ``trace`` scenario).
    :param seeds: episode seeds are drawn from ``[lo, hi)`` by the env's own RNG.
    :param placement, scaling, reclaim, preemption: heuristics that provide those components.
    :param reward: ``jct`` (default: -jobs in system x elapsed hours / jobs; sums to -mean JCT in
        hours), ``slowdown`` (sums to -mean slowdown), ``fee`` (-dollars / jobs), ``deadline``
        (-1 per job that finishes after its deadline)."""

    scenario: str = "default"
    overrides: tuple[tuple[str, str], ...] = ()
    trace: str | None = None
    seeds: tuple[int, int] = (0, 10_000)
    placement: str = "aryl"
    scaling: str = "aryl"
    reclaim: str = "aryl"
    preemption: str | None = None
    reward: str = "jct"

    @staticmethod
    def from_kwargs(**kw: Any) -> CoreConfig:
        overrides = kw.pop("overrides", None) or {}
        if isinstance(overrides, Mapping):
            overrides = tuple((str(k), str(v)) for k, v in overrides.items())
        seeds = tuple(kw.pop("seeds", (0, 10_000)))
        cfg = CoreConfig(overrides=tuple(overrides), seeds=(int(seeds[0]), int(seeds[1])), **kw)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if self.reward not in REWARDS:
            raise ConfigError(f"unknown reward '{self.reward}'; valid rewards: {', '.join(REWARDS)}.")
        if not self.seeds[0] < self.seeds[1]:
            raise ConfigError(f"seeds must be a range [lo, hi) with lo < hi, got {self.seeds}.")
        self.scenario_obj()
        for name in (self.placement, self.scaling, self.reclaim, *([self.preemption] if self.preemption else [])):
            composed(name)

    def scenario_obj(self) -> scenarios.Scenario:
        sets = dict(self.overrides)
        name = self.scenario
        if self.trace:
            name, sets["workload.trace"] = "trace", self.trace
        return scenarios.get(name, sets)


class Core:
    """One episode at a time. Not a Gymnasium env itself: the adapters wrap it."""

    def __init__(self, config: CoreConfig) -> None:
        self.config = config
        self.scenario = config.scenario_obj()
        self.engine: Engine | None = None
        self.result: SimResult | None = None
        self.metrics: dict[str, Any] | None = None

    # ------------------------------------------------------------------ episode
    def reset(self, seed: int) -> None:
        c = self.config
        place, scale, recl = composed(c.placement), composed(c.scaling), composed(c.reclaim)
        pre = composed(c.preemption) if c.preemption else None
        self.scheduler = ComposedScheduler(
            name="agent",
            ordering=place.ordering,  # unused by the core: the ordering seat is the agent's
            placement=place.placement,
            scaling=scale.scaling,
            preemption=pre.preemption if pre else NoPreemption(),
            reclaimer=recl.reclaimer,
            borrows=place.borrows,
            round_s=pre.round_s if pre else None,
        )
        built = scenarios.build(self.scenario, seed)
        if hasattr(self.scheduler.placement, "use_rng"):
            self.scheduler.placement.use_rng(built.policy_rng)
        self.engine = Engine(
            built.servers,
            built.jobs,
            self.scheduler,
            scenarios.shared_throughput(),
            built.demand,
            self.scenario.sim,
            built.failure_rng,
        )
        self.view = self.engine.view
        self.num_jobs = len(built.jobs)
        self.seed = seed
        self.result = None
        self.metrics = None
        self._fits: dict[int, Start | None] = {}
        self._acc = self._accumulators()
        self.engine.start()
        self._begin_decision_point()

    @property
    def done(self) -> bool:
        return self.result is not None

    @property
    def truncated(self) -> bool:
        return self.engine is not None and self.engine.truncated

    # ------------------------------------------------------------------ decisions
    def can_start(self, job: int) -> Start | None:
        """The placement component's start for pending ``job`` now, or None (cached within one
        decision point: starts only consume GPUs, so a job that did not fit still does not)."""
        if job in self._fits:
            return self._fits[job]
        start = self.scheduler.placement.place(self.view, job)
        self._fits[job] = start
        return start

    def start(self, job: int) -> None:
        """Start ``job`` (it must fit); stays at the same decision point."""
        start = self.can_start(job)
        if start is None:
            raise ValueError(f"job {job} does not fit now")
        self.apply(start)
        # re-check only the jobs that fitted before this start
        self._fits = {j: None for j, s in self._fits.items() if s is None and j != job}

    def apply(self, action: Action) -> None:
        assert self.engine is not None
        self.engine.apply(action)

    def advance(self) -> None:
        """End this decision point (scaling acts), run to the next one."""
        for action in self.scheduler.scaling.scale(self.view):
            self.apply(action)
        assert self.engine is not None
        if not self.engine.next_decision():
            self.result = self.engine.result()
            self.metrics = summarize(self.result)
            return
        self._begin_decision_point()

    def _begin_decision_point(self) -> None:
        assert self.engine is not None
        self._fits = {}
        for action in self.scheduler.preemption.preempt(self.view):
            self.apply(action)

    def pending(self) -> list[int]:
        return list(self.view.pending)

    # ------------------------------------------------------------------ rewards
    def _accumulators(self) -> tuple[float, float, float, int]:
        e = self.engine
        assert e is not None
        return (e.i_in_system, e.i_slowdown, e.i_price, e.deadline_misses)

    def reward(self) -> float:
        """Reward since the previous call (see :class:`CoreConfig`)."""
        now = self._accumulators()
        prev, self._acc = self._acc, now
        n = max(1, self.num_jobs)
        kind = self.config.reward
        if kind == "jct":
            return -(now[0] - prev[0]) / 3600.0 / n
        if kind == "slowdown":
            return -(now[1] - prev[1]) / n
        if kind == "fee":
            return -(now[2] - prev[2]) / 3600.0 / n
        return -float(now[3] - prev[3])

    # ------------------------------------------------------------------ observations helpers
    def time_of_day(self) -> tuple[float, float]:
        assert self.engine is not None
        hour = (self.scenario.inference.start_hour + self.engine.now / 3600.0) % 24.0
        return math.sin(2 * math.pi * hour / 24.0), math.cos(2 * math.pi * hour / 24.0)

    def waiting(self, job: int) -> float:
        assert self.engine is not None
        j = self.engine.jobs[job]
        return j.queued_time + (self.engine.now - j.queued_since if j.status == JobStatus.PENDING else 0.0)

