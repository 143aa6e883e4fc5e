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

import dataclasses
import itertools
import math
import pickle
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envs.sim import scenarios
from envs.sim.config import ConfigError
from envs.sim.engine import Engine, SimResult
from envs.sim.metrics import summarize
from envs.sim.model import Pool
from envs.sim.policy import (
    Action,
    ClusterView,
    ComposedScheduler,
    Integrals,
    JobStatus,
    NoPreemption,
    Ordering,
    Preempt,
    Start,
    keeper,
    monotone,
    reconsiders,
)
from heuristics import registry


@dataclass(frozen=True)
class Reward:
    """A reward by name: between two decisions, ``-(change of read(integrals)) / unit``, also per
    job of the episode where ``per_job``, so that an episode's return sums to the named figure.
    ``figure`` is that figure's metric (``envs.sim.metrics.METRICS``), better when lower where
    ``lower_better``: training keeps the checkpoint that evaluates best by it."""

    doc: str
    read: Callable[[Integrals], float]
    figure: str
    unit: float = 1.0
    per_job: bool = True
    lower_better: bool = True


REWARDS: dict[str, Reward] = {
    "jct": Reward(
        "-(jobs in the system x elapsed hours) / jobs: sums to -(mean JCT in hours)",
        lambda i: i.job_seconds,
        "avg_jct_s",
        3600.0,
    ),
    "slowdown": Reward(
        "-(sum of 1 / duration over the jobs in the system x time) / jobs: sums to -(mean slowdown)",
        lambda i: i.slowdown,
        "avg_slowdown",
    ),
    "fee": Reward(
        "-(dollars per hour held x elapsed hours) / jobs: sums to -(dollars per job)",
        lambda i: i.fee_hours,
        "fee",
        3600.0,
    ),
    "deadline": Reward(
        "-1 per job that finishes after its deadline",
        lambda i: float(i.deadline_misses),
        "deadline_hit_ratio",
        per_job=False,
        lower_better=False,
    ),
}
"""The rewards by name; a new reward is one entry over the engine's integrals (``ClusterView.integrals``)."""


def composed(name: str) -> ComposedScheduler:
    """A fresh instance of heuristic ``name``, which must be built from components."""
    policy = registry.make(name)
    if not isinstance(policy, ComposedScheduler):
        valid = [n for n in registry.names() if isinstance(registry.make(n), ComposedScheduler)]
        raise ConfigError(
            f"policy '{name}' is not built from ordering/placement/scaling components, so it cannot serve as one; "
            f"component policies: {', '.join(valid)}."
        )
    return policy


@dataclass(frozen=True)
class Components:
    """The heuristics, by name, in the seats no agent controls: ``placement`` decides whether a
    job fits, its gang size and (with no placement agent) its servers; ``scaling`` sets elastic
    jobs' flexible workers; ``reclaim`` picks the loans that go back; ``preemption`` acts first at
    each decision (``None``: nothing does). The env, training, recording and agent configs all
    hold one."""

    placement: str = "aryl"
    scaling: str = "aryl"
    reclaim: str = "aryl"
    preemption: str | None = "aryl"

    SEATS = ("placement", "scaling", "reclaim", "preemption")

    def names(self) -> tuple[str, ...]:
        """The heuristics named, in seat order (no preemption left out)."""
        return tuple(n for n in (self.placement, self.scaling, self.reclaim, self.preemption) if n)

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Components:
        """From a mapping that may hold the seats' names (a flat config of an older version)."""
        return cls(**{k: values[k] for k in cls.SEATS if k in values})

    def validate(self, level: str) -> None:
        """Raise the user's error unless every seat names a component heuristic that can act at
        information level ``level``."""
        for name in self.names():
            composed(name)
            registry.check_information(name, level)


@dataclass(frozen=True)
class CoreConfig:
    """:param scenario: scenario name; ``overrides``: its ``--set`` pairs; ``trace``: a CSV to
    replay (implies the ``trace`` scenario).
    :param seeds: episode seeds are drawn from ``[lo, hi)`` by the env's own RNG.
    :param components: the heuristics in the seats no agent controls (:class:`Components`); the
        env's keyword arguments ``placement``, ``scaling``, ``reclaim`` and ``preemption`` set them.
    :param reward: ``jct`` (default: -jobs in system x elapsed hours / jobs; sums to -mean JCT in
        hours), ``slowdown`` (sums to -mean slowdown), ``fee`` (-dollars / jobs), ``deadline``
        (-1 per job that finishes after its deadline).
    :param reward_reference: a heuristic by name (or None): the reward is then measured against
        that heuristic's own run of the same episode (same seed, same jobs), as Mao et al.'s
        input-dependent baseline (ICLR'19): between two decisions the reference's change of the
        same figure over the same simulated interval is added back, and its remainder at the
        episode's end, so an episode's return is -(the agent's figure - the reference's). What
        the agent controls is unchanged; what it does not (the arrivals, the durations) mostly
        cancels, so returns vary far less from one episode to the next.
    :param oracle: the view shows every seat the truth (true durations and machine speeds),
        whatever the scenario's information level: for headroom measurements with an oracle in
        the ordering seat (``benchmarks/headroom.py``). An oracle among the components turns it
        on too, as its ``oracle-*`` name promises; the agents then see the truth as well."""

    scenario: str = "default"
    overrides: tuple[tuple[str, str], ...] = ()
    trace: str | None = None
    seeds: tuple[int, int] = (0, 10_000)
    components: Components = field(default_factory=Components)
    reward: str = "jct"
    series: bool = False  # keep the scenario's time series (evaluation plots them; training does not need them)
    borrowing: bool | None = (
        None  # jobs must be runnable by a policy that borrows (scenarios.build); None: as ours does
    )
    oracle: bool = False
    reward_reference: str | None = None

    @staticmethod
    def from_kwargs(**kw: Any) -> CoreConfig:
        overrides = kw.pop("overrides", None) or {}
        if isinstance(overrides, Mapping):
            overrides = tuple((str(k), str(v)) for k, v in overrides.items())
        seeds = tuple(kw.pop("seeds", (0, 10_000)))
        if isinstance(kw.get("components"), Mapping):  # as a record's JSON holds it
            kw["components"] = Components(**kw["components"])
        seats = {k: kw.pop(k) for k in Components.SEATS if k in kw}
        if seats:
            kw["components"] = dataclasses.replace(kw.get("components", Components()), **seats)
        cfg = CoreConfig(overrides=tuple(overrides), seeds=(int(seeds[0]), int(seeds[1])), **kw)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if self.reward not in REWARDS:
            raise ConfigError(f"unknown reward '{self.reward}'; valid rewards: {', '.join(REWARDS)}.")
        if not self.seeds[0] < self.seeds[1]:
            raise ConfigError(f"seeds must be a range [lo, hi) with lo < hi, got {self.seeds}.")
        level = self.scenario_obj().information.level
        self.components.validate(level)
        if self.reward_reference is not None:
            registry.entry(self.reward_reference)
            registry.check_information(self.reward_reference, level)

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
        # one instance per heuristic name: its components may share state (and so may its expert)
        self.instances: dict[str, ComposedScheduler] = {}
        seats = c.components
        place, scale, recl = (
            self.heuristic(seats.placement),
            self.heuristic(seats.scaling),
            self.heuristic(seats.reclaim),
        )
        pre = self.heuristic(seats.preemption) if seats.preemption else None
        self.scheduler = ComposedScheduler(
            name="agent",
            ordering=place.ordering,  # unused by the core: the ordering seat is the agent's
            placement=place.placement,
            scaling=scale.scaling,
            preemption=pre.preemption if pre else NoPreemption(),
            reclaimer=recl.reclaimer,
            borrows=place.borrows,
            round_s=pre.round_s if pre else None,
            oracle=c.oracle or any(h.oracle for h in self.instances.values()),
        )
        self._borrowing = self.scheduler.borrows if c.borrowing is None else c.borrowing
        built = scenarios.build(self.scenario, seed, self._borrowing)
        self._dropped = len(built.dropped)
        if hasattr(self.scheduler.placement, "use_rng"):
            self.scheduler.placement.use_rng(built.policy_rng)
        self.engine = Engine(
            built.servers,
            built.jobs,
            self.scheduler,
            scenarios.shared_throughput(),
            built.demand,
            self.scenario.sim if c.series else dataclasses.replace(self.scenario.sim, sample_s=0.0),
            built.failure_rng,
            knowledge=built.knowledge,
        )
        self.view = self.engine.view
        self._keeper = keeper(self.scheduler.preemption)
        # refusals of a monotone placement kept across decision points (no Keeper: what it keeps
        # changes at its own times): the view's room_grown when they were made
        self._refusals_hold = self._keeper is None and monotone(self.scheduler.placement)
        # the placement may take a job it refused once another has started (policy.reconsiders)
        self.reconsiders = reconsiders(self.scheduler.placement)
        self._grown = -1
        self.num_jobs = len(built.jobs)
        self.seed = seed
        self.result = None
        self.metrics = None
        self._fits: dict[int, Start | None] = {}
        self.decision_index = 0
        self._experts: dict[int, tuple[int, Iterator[int], int | None]] = {}
        self._acc = self.view.integrals()
        self._acc_t = 0.0
        self._reference = None if c.reward_reference is None else self._run_reference(c.reward_reference, seed)
        self.engine.start()
        self._begin_decision_point()

    def copy(self) -> Core:
        """A copy of the whole episode that continues on its own (for lookahead searches over
        the simulation). The experts' ranking walks (iterators) are not copied: the copy's
        experts begin fresh rankings, as at a new decision point. A pickle round trip: the same
        copy as ``copy.deepcopy`` here (every part is plain data, rebuilt in the same order), and
        faster."""
        held, self._experts = self._experts, {}
        try:
            copied: Core = pickle.loads(pickle.dumps(self, pickle.HIGHEST_PROTOCOL))
            return copied
        finally:
            self._experts = held

    def heuristic(self, name: str) -> ComposedScheduler:
        """This episode's instance of component heuristic ``name``."""
        if name not in self.instances:
            self.instances[name] = composed(name)
        return self.instances[name]

    @property
    def done(self) -> bool:
        return self.result is not None

    @property
    def truncated(self) -> bool:
        return self.engine is not None and self.engine.truncated

    # ------------------------------------------------------------------ decisions
    def can_start(self, job: int) -> Start | None:
        """The placement component's start for pending ``job`` now, or None (cached within one
        decision point: starts only consume GPUs, so a job that did not fit still does not);
        None too for a job the preemption component keeps GPUs from (a ``Keeper``: those it
        freed for another job, as of this decision point's start)."""
        if job in self._fits:
            return self._fits[job]
        keeps = self._keeper
        start = (
            None
            if keeps is not None and keeps.kept_from(self.view, job)
            else self.scheduler.placement.place(self.view, job)
        )
        self._fits[job] = start
        return start

    def start(self, job: int) -> None:
        """Start ``job`` where the placement component puts it; stays at the same decision point."""
        start = self.can_start(job)
        if start is None:
            raise ValueError(f"job {job} does not fit now")
        self.start_with(start)

    def apply(self, action: Action) -> None:
        assert self.engine is not None
        self.engine.apply(action)

    def preempt(self, job: int) -> None:
        """Preempt running ``job`` at once (its GPUs free now; work since its last checkpoint is
        lost); stays at the same decision point, where jobs that did not fit may fit now."""
        self.apply(Preempt(job))
        self._fits = {}

    def advance(self) -> None:
        """End this decision point (scaling acts), run to the next one."""
        for action in self.scheduler.scaling.scale(self.view):
            self.apply(action)
        assert self.engine is not None
        if not self.engine.next_decision():
            self.result = self.engine.result()
            self.result.dropped = self._dropped
            self.metrics = summarize(self.result)
            return
        self._begin_decision_point()

    def _begin_decision_point(self) -> None:
        assert self.engine is not None
        self.decision_index += 1
        for action in self.scheduler.preemption.preempt(self.view):
            self.apply(action)
        if self._keeper is not None:
            self._keeper.keeping(self.view)
        grown = self.view.room_grown()
        if self._refusals_hold and grown == self._grown:  # no room since: the jobs refused still do not fit
            self._fits = {j: s for j, s in self._fits.items() if s is None}
        else:
            self._fits = {}
        self._grown = grown

    def pending(self) -> list[int]:
        return list(self.view.pending)

    def choices(self, slots: int) -> tuple[list[int], list[bool]]:
        """The ``slots`` longest-waiting jobs (queue order) and whether each can start now."""
        visible = list(itertools.islice(self.view.pending, slots))
        return visible, [self.can_start(j) is not None for j in visible]

    def next_choice(self, slots: int) -> tuple[list[int], list[bool]]:
        """:meth:`choices`, after advancing past decision points where no visible job can start
        (their components still act); empty lists once the episode is over."""
        while not self.done:
            visible, fits = self.choices(slots)
            if any(fits):
                return visible, fits
            self.advance()
        return [], []

    def ordering_mask(self, fits: list[bool], slots: int) -> np.ndarray:
        """Valid ordering actions: the slots of jobs that can start, and "advance" (index
        ``slots``), unless the cluster is idle while a job can start: nothing would change until
        the next arrival, and a deterministic agent that advances there idles forever."""
        mask = np.zeros(slots + 1, dtype=bool)
        mask[: len(fits)] = fits
        mask[slots] = bool(self.view.running) or not any(fits)
        return mask

    # ------------------------------------------------------------------ worker-by-worker placement
    def begin_placement(self, job: int) -> None:
        """Start placing ``job`` server by server (the size of its gang and its start are what
        the placement component would give; only where its workers go is left open)."""
        ref = self.can_start(job)
        if ref is None:
            raise ValueError(f"job {job} does not fit now")
        self.placing = job
        self.reference = ref
        self.left = sum(n for _, n in ref.base)
        self.chosen: dict[int, int] = {}

    def placement_mask(self) -> np.ndarray:
        """Servers that may take the next worker(s) of the job being placed."""
        view = self.view
        spec = view.job(self.placing)
        pools = (Pool.TRAINING, Pool.INFERENCE) if self.scheduler.borrows else (Pool.TRAINING,)
        mask = np.zeros(len(view.servers), dtype=bool)
        if self.chosen:
            gtype = view.servers[next(iter(self.chosen))].gpu_type.name
            keys = [(gtype, p) for p in pools]
        else:  # a first server: its type must hold the whole gang
            keys = [
                (t, p)
                for t, p in view.pool_types()
                if p in pools
                and spec.allows(view.gpu_type(t))
                and sum(view.total_free(t, q) for q in pools) >= self.left
            ]
        for t, p in keys:
            for sid in view.servers_by_free(t, p):
                if sid not in self.chosen:
                    mask[sid] = True
        return mask

    def place_on(self, server: int) -> bool:
        """Put as many of the remaining workers as fit on ``server``; True once the job starts."""
        n = min(self.view.free(server), self.left)
        self.chosen[server] = n
        self.left -= n
        if self.left > 0:
            return False
        self.start_with(Start(self.placing, tuple(self.chosen.items())))
        return True

    def start_with(self, start: Start) -> None:
        """Apply a start; only the jobs that fitted before it can have stopped fitting (unless the
        placement :func:`~envs.sim.policy.reconsiders`: then every job is asked again)."""
        self.apply(start)
        if self.reconsiders:
            self._fits = {}
        else:
            self._fits = {j: s for j, s in self._fits.items() if s is None and j != start.job}

    def expert_job(self, ordering: Ordering, visible: list[int]) -> int | None:
        """The job ``ordering`` would start now among the ``visible`` ones: the next of its
        ranking that can start; None if there is none or it blocks at one that cannot. Jobs that
        are not visible are skipped, as if absent.

        Within one decision point the ranking is walked once, as ComposedScheduler walks it: while
        the jobs it proposed are the ones started, the same (possibly stateful) iterator goes on;
        any other start begins a fresh ranking, and so does every start where the placement
        reconsiders (ComposedScheduler then walks again from the top)."""
        key = id(ordering)
        held = self._experts.get(key)
        if held is not None and held[0] == self.decision_index and held[2] is not None and not self.reconsiders:
            it = held[1] if self.view.status_of(held[2]) != JobStatus.PENDING else None
        else:
            it = None
        if it is None:
            it = iter(ordering.rank(self.view))
        for job in it:
            if job not in visible:
                continue
            if self.can_start(job) is not None:
                self._experts[key] = (self.decision_index, it, job)
                return job
            if ordering.blocking:
                break
        self._experts[key] = (self.decision_index, it, None)
        return None

    def expert_server(self) -> int:
        """The next server of the placement component's own start for the job being placed."""
        for sid, _ in (*self.reference.base, *self.reference.flex):
            if sid not in self.chosen:
                return sid
        raise RuntimeError("the reference placement is used up")

    # ------------------------------------------------------------------ rewards
    def reward(self) -> float:
        """Reward since the previous call (:data:`REWARDS`), against the reference's run where
        the config names one (``CoreConfig.reward_reference``)."""
        now, t = self.view.integrals(), self.view.now
        prev, self._acc = self._acc, now
        prev_t, self._acc_t = self._acc_t, t
        r = REWARDS[self.config.reward]
        change = -(r.read(now) - r.read(prev))
        ref = self._reference
        if ref is not None:
            times, values = ref
            end = float(values[-1]) if self.done else float(np.interp(t, times, values))
            change += end - float(np.interp(prev_t, times, values))
        change /= r.unit
        return change / max(1, self.num_jobs) if r.per_job else change

    def _run_reference(self, name: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Heuristic ``name``'s own run of this episode: the reward's figure so far, at every one
        of its decisions (after its actions) and at its end. Between two decisions the figures
        grow linearly (the engine's integrals have rates that only events change), so
        interpolating gives the figure at any time."""
        read = REWARDS[self.config.reward].read
        times, values = [0.0], [0.0]

        def record(view: ClusterView) -> None:
            times.append(view.now)
            values.append(read(view.integrals()))

        sim = dataclasses.replace(self.scenario, sim=dataclasses.replace(self.scenario.sim, sample_s=0.0))
        scenarios.simulate(sim, registry.make(name), seed, borrowing=self._borrowing, observe=record)
        return np.asarray(times), np.asarray(values, dtype=float)

    # ------------------------------------------------------------------ observations helpers
    def time_of_day(self) -> tuple[float, float]:
        hour = (self.scenario.inference.start_hour + self.view.now / 3600.0) % 24.0
        return math.sin(2 * math.pi * hour / 24.0), math.cos(2 * math.pi * hour / 24.0)
