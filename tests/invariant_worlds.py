"""Hypothesis-drawn small worlds for the invariant and determinism tests, and ``Chaos``.

A world: 1-4 training servers of 4 or 8 GPUs (V100, the last one sometimes an A100; machine speed
factors as in ``cloud``), 0-4 T4 inference servers whose noisy demand curve (short ``step_s``
and ``notice_s``) loans and reclaims them within the episode, optional failures (small MTBF),
an optional finite horizon, restart overheads, checkpoint intervals, run-time fluctuation and
co-location contention, and 1-30 jobs: submit times with ties, durations, GPU counts up to the
capacity of one type they allow (so every job is feasible), elastic ranges, GPU-type
constraints (one type, several, any), grace periods, TE/BE, priorities, deadlines, speed phases
and regimes, MLFS's learning curves, required accuracies, urgencies and model-parallel tasks.

``Chaos`` is a test-only policy that borrows and takes random *valid* actions, so the engine's
loan, reclaim, scale, migrate, preempt and stop paths run whatever the registered policies do.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from envs.sim.accuracy import LearningCurve, ModelTask
from envs.sim.engine import Engine, SimConfig, SimResult
from envs.sim.inference import DemandCurve, InferenceConfig
from envs.sim.information import Knowledge
from envs.sim.model import A100, T4, V100, JobClass, JobSpec, Pool, ServerSpec
from envs.sim.policy import (
    PLACEABLE,
    Action,
    Alloc,
    ClusterView,
    JobStatus,
    Migrate,
    Preempt,
    Scale,
    ServerStatus,
    Start,
)
from envs.sim.policy import Stop as StopAction
from envs.sim.throughput import ThroughputModel
from heuristics import registry

TP = ThroughputModel()  # one per module: it only caches pure lookups
TYPES = {t.name: t for t in (V100, A100, T4)}
MODELS = ("resnet50", "bert", "vgg16", "gpt2", "cifar10", "ncf", "unknownnet")
HORIZON_CAP = 30 * 86400.0  # every run ends: a livelocked policy cannot hang the suite
POLICIES = [*registry.names(), "chaos"]
PROPERTY = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,  # CI draws the same examples every time
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class World:
    servers: tuple[ServerSpec, ...]
    jobs: tuple[JobSpec, ...]
    inference: InferenceConfig | None
    config: SimConfig
    seed: int
    knowledge: Knowledge = field(default_factory=Knowledge)  # what the policy may know of durations

    @property
    def failures(self) -> bool:
        return self.config.mtbf_h > 0


def capacity_by_type(servers: Sequence[ServerSpec], pools: Sequence[Pool]) -> dict[str, int]:
    cap: dict[str, int] = defaultdict(int)
    for s in servers:
        if s.pool in pools:
            cap[s.gpu_type.name] += s.num_gpus
    return cap


@functools.cache
def ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Strategies are built once: building them inside a draw dominates generation time."""
    return st.integers(lo, hi)


@functools.lru_cache(maxsize=None, typed=True)  # typed: JobClass.BE == 1 == 1.0 must not share
def choice(*values: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(values)


BOOL = st.booleans()
GAP = st.one_of(st.just(0.0), st.integers(1, 3000).map(float), st.floats(0.5, 3000.0))
DURATION = st.one_of(st.integers(1, 3000).map(float), st.floats(1.0, 3000.0))
SLACK = st.floats(1.0, 3.0)
FRACS = st.lists(choice(0.1, 0.25, 0.5, 0.75, 0.9), max_size=2)
MULT = choice(0.5, 1.0, 1.5, 2.0, 3.0)
CURVE = st.builds(
    LearningCurve, ints(1, 1000), choice(0.02, 0.05, 0.2), choice(0.5, 1.0, 1.5), st.just(0.1), st.just(0.9)
)


@st.composite
def speed_phases(draw: st.DrawFn) -> tuple[tuple[float, float], ...]:
    if not draw(BOOL):
        return ()
    return tuple((f, draw(MULT)) for f in (0.0, *sorted(set(draw(FRACS)))))


PHASES = speed_phases()


@st.composite
def job_spec(
    draw: st.DrawFn, i: int, t: float, types: tuple[frozenset[str] | None, ...], cap: dict[str, int]
) -> JobSpec:
    gpu_types = draw(choice(*types))
    # every job fits the training capacity of one type it allows: all jobs are feasible
    num = draw(ints(1, max(c for name, c in cap.items() if gpu_types is None or name in gpu_types)))
    lo, hi = (draw(ints(1, num)), draw(ints(num, 2 * num))) if draw(BOOL) else (num, num)
    duration = draw(DURATION)
    phases = draw(PHASES)
    regimes: tuple[float, ...] = tuple(sorted({1.0, *(m for _, m in phases)})) if draw(BOOL) and phases else ()
    curve = draw(CURVE) if draw(BOOL) else None
    parts = draw(ints(1, min(num, 3)))
    return JobSpec(
        job_id=i,
        name=f"j{i}",
        submit_time=t,
        duration=duration,
        num_gpus=num,
        min_gpus=lo,
        max_gpus=hi,
        model=draw(choice(*MODELS)),
        gpu_types=gpu_types,
        job_class=draw(choice(*JobClass)),
        priority=draw(ints(0, 3)),
        deadline=None if draw(BOOL) else t + duration * draw(SLACK),
        grace_period=draw(choice(0.0, 10.0, 60.0, 300.0)),
        user=f"u{draw(ints(0, 2))}",
        speed_phases=phases,
        speed_regimes=regimes,
        urgency=draw(choice(1.0, 1.0, 2.0, 4.0)),
        curve=curve,
        required_accuracy=draw(choice(None, 0.3, 0.6, 0.85)) if curve is not None else None,
        tasks=tuple(ModelTask(1.0 / parts, k - 1) for k in range(parts)) if parts > 1 else (),
        comm_gb=draw(choice(0.0, 1.0)),
    )


@st.composite
def worlds(draw: st.DrawFn, max_jobs: int = 30) -> World:
    n_train = draw(ints(1, 4))
    a100 = n_train > 1 and draw(BOOL)  # then the last training server is an A100 one
    speed = choice(1.0, 1.0, 1.0, 0.8, 1.25)
    servers = [
        ServerSpec(
            i, A100 if a100 and i == n_train - 1 else V100, draw(choice(4, 8)), Pool.TRAINING, i % 2, draw(speed)
        )
        for i in range(n_train)
    ]
    n_inf = draw(choice(0, 1, 2, 3, 4, 4))
    inf_gpus = draw(choice(4, 8))
    servers += [ServerSpec(n_train + i, T4, inf_gpus, Pool.INFERENCE) for i in range(n_inf)]
    types: tuple[frozenset[str] | None, ...] = (None, frozenset({V100.name}), frozenset({V100.name, T4.name}))
    if a100:
        types += (frozenset({A100.name}), frozenset({A100.name, V100.name}))
    cap = capacity_by_type(servers, (Pool.TRAINING,))
    jobs: list[JobSpec] = []
    t = 0.0
    for i in range(draw(ints(1, max_jobs))):
        t += draw(GAP)
        jobs.append(draw(job_spec(i, t, types, cap)))
    inference = None
    if n_inf:
        inference = InferenceConfig(
            peak_to_trough=draw(st.floats(1.2, 2.2)),
            mean_utilization=draw(st.floats(0.1, 0.6)),
            start_hour=draw(st.floats(0.0, 24.0, exclude_max=True)),
            step_s=draw(choice(60.0, 120.0, 300.0, 900.0)),
            noise=draw(choice(0.0, 0.3, 0.6, 1.0)),
            headroom=draw(choice(0.0, 0.05, 0.25)),
            notice_s=draw(choice(0.0, 30.0, 120.0, 600.0)),
            never_reclaim=draw(ints(0, 9)) == 0,
        )
    mtbf = draw(choice(0.0, 0.0, 0.5, 2.0))
    horizon = draw(choice(HORIZON_CAP, HORIZON_CAP, 3000.0, 20000.0, 60000.0))
    if mtbf and horizon == HORIZON_CAP:
        horizon = 100000.0  # with failures a job may never finish: always a finite horizon
    config = SimConfig(
        restart_base_s=draw(choice(0.0, 5.0, 30.0)),
        restart_per_gpu_s=draw(choice(0.0, 1.0)),
        checkpoint_interval_s=draw(choice(0.0, 100.0, 1800.0)),
        mtbf_h=mtbf,
        repair_h=draw(choice(0.05, 0.5)),
        horizon_s=horizon,
        sample_s=draw(choice(0.0, 300.0)),
        fluctuation=draw(choice(0.0, 0.0, 0.2)),
        contention=draw(choice(0.0, 0.0, 0.1, 0.5)),
    )
    level = draw(choice("clairvoyant", "clairvoyant", "estimate", "none"))
    factor = tuple(draw(st.floats(0.2, 5.0)) if level == "estimate" else 1.0 for _ in jobs)
    return World(tuple(servers), tuple(jobs), inference, config, draw(ints(0, 2**16)), Knowledge(level, factor))


def make_policy(name: str, world: World) -> Any:
    """A fresh policy; a randomised one gets its stream from the world's seed."""
    if name == "chaos":
        return Chaos(world.seed)
    policy = registry.make(name)
    if hasattr(policy, "use_rng"):
        policy.use_rng(np.random.default_rng(world.seed + 1))
    return policy


def simulate(world: World, policy: Any) -> SimResult:
    demand = None
    if world.inference is not None:
        n_inf = sum(s.pool == Pool.INFERENCE for s in world.servers)
        demand = DemandCurve(world.inference, n_inf, np.random.default_rng(world.seed))
    rng = np.random.default_rng(world.seed + 2)
    knowledge = world.knowledge
    name = getattr(policy, "name", "")
    if knowledge.level == "none" and name in registry.names() and registry.entry(name).needs != "none":
        knowledge = Knowledge("estimate", knowledge.factor)  # a policy that needs durations gets estimates
    engine = Engine(world.servers, world.jobs, policy, TP, demand, world.config, rng, log=True, knowledge=knowledge)
    if hasattr(policy, "attach"):
        policy.attach(engine)  # a checker reads the truth beside the policy's view
    return engine.run()


def merged(base: Alloc, flex: Alloc) -> dict[int, int]:
    """GPUs per server of a placement."""
    out: dict[int, int] = defaultdict(int)
    for sid, n in (*base, *flex):
        out[sid] += n
    return dict(out)


def may_stop(view: ClusterView, job: int) -> bool:
    """A job may be stopped early once it reaches its required accuracy (``JobSpec``)."""
    spec, st_ = view.job(job), view.state(job)
    if spec.required_accuracy is None or spec.curve is None:
        return False
    return spec.curve.accuracy(st_.work_done / st_.work_total) >= spec.required_accuracy


class Chaos:
    """Test-only: random *valid* actions. Borrows; starts jobs anywhere they may run (loaned servers
    included) at random sizes and spreads; scales, migrates and preempts (graceful or not) running
    jobs, each job at most ``budget`` times so every run makes progress; stops the jobs that reached
    their required accuracy; reclaims at random."""

    name = "chaos"
    borrows = True

    def __init__(self, seed: int, round_s: float = 250.0, budget: int = 2) -> None:
        self.rng = np.random.default_rng(seed)
        self.round_s = round_s
        self.left: dict[int, int] = defaultdict(lambda: budget)

    def _fill(self, cap: dict[int, int], need: int) -> Alloc | None:
        """Spread ``need`` GPUs at random over ``cap`` (server -> GPUs usable), consuming it."""
        sids = [s for s in sorted(cap) if cap[s] > 0]
        self.rng.shuffle(sids)
        if sum(cap[s] for s in sids) < need:
            return None
        out, left = [], need
        for i, s in enumerate(sids):
            rest = sum(cap[x] for x in sids[i + 1 :])
            n = int(self.rng.integers(max(0, left - rest), min(cap[s], left) + 1))
            if n:
                out.append((int(s), n))
                cap[s] -= n
                left -= n
        assert left == 0
        return tuple(out)

    def _place(self, view: ClusterView, job: int, own: bool) -> tuple[Alloc, Alloc] | None:
        spec = view.job(job)
        hosted = merged(view.state(job).base, view.state(job).flex) if own else {}
        caps: dict[str, dict[int, int]] = defaultdict(dict)
        for s in view.servers:
            if not spec.allows(s.gpu_type):
                continue
            st_, mine = view.server_status(s.server_id), hosted.get(s.server_id, 0)
            if st_ in PLACEABLE:
                caps[s.gpu_type.name][s.server_id] = view.free(s.server_id) + mine
            elif st_ == ServerStatus.RECLAIMING and mine:
                caps[s.gpu_type.name][s.server_id] = mine  # may keep what it holds there
        options = [t for t in sorted(caps) if sum(caps[t].values()) >= spec.min_gpus]
        if not options:
            return None
        cap = caps[options[int(self.rng.integers(len(options)))]]
        total = sum(cap.values())
        if not spec.elastic:
            base = self._fill(cap, spec.num_gpus)
            return None if base is None else (base, ())
        nb = int(self.rng.integers(spec.min_gpus, min(spec.max_gpus, total) + 1))
        nf = int(self.rng.integers(0, min(spec.max_gpus - nb, total - nb) + 1))
        base, flex = self._fill(cap, nb), self._fill(cap, nf)
        assert base is not None and flex is not None
        return base, flex

    def _scale(self, view: ClusterView, job: int) -> Scale:
        spec, state = view.job(job), view.state(job)
        flex = merged(state.flex, ())
        cap: dict[int, int] = {}
        for s in view.servers:
            sid = s.server_id
            if s.gpu_type.name == state.gpu_type and view.server_status(sid) in PLACEABLE:
                cap[sid] = view.free(sid) + flex.get(sid, 0)
            elif flex.get(sid):
                cap[sid] = flex[sid]  # a reclaiming server: keep at most what it holds there
        nb = sum(n for _, n in state.base)
        nf = int(self.rng.integers(0, min(spec.max_gpus - nb, sum(cap.values())) + 1))
        new = self._fill(cap, nf)
        assert new is not None
        return Scale(job, new)

    def decide(self, view: ClusterView) -> Iterator[Action]:
        pending = sorted(view.pending)
        self.rng.shuffle(pending)
        for job in pending:
            if self.rng.random() < 0.85:
                placed = self._place(view, job, own=False)
                if placed is not None:
                    yield Start(job, *placed)
        for job in sorted(view.running):
            if view.status_of(job) != JobStatus.RUNNING:
                continue
            if may_stop(view, job) and self.rng.random() < 0.5:
                yield StopAction(job)
                continue
            if self.left[job] <= 0 or self.rng.random() > 0.15:
                continue
            self.left[job] -= 1
            kind = int(self.rng.integers(3))
            if kind == 0 and view.job(job).elastic:
                yield self._scale(view, job)
            elif kind == 1:
                placed = self._place(view, job, own=True)
                if placed is not None:
                    yield Migrate(job, *placed)
            else:
                yield Preempt(job, graceful=bool(self.rng.integers(2)))

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        loaned = sorted(view.loaned_servers())
        return [int(s) for s in self.rng.choice(loaned, size=k, replace=False)]
