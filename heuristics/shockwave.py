"""Shockwave (Zheng et al., 2022): fair and efficient scheduling under dynamic adaptation.

Round based. Every ``round_s`` the policy runs the next round of its current plan; it re-plans at
a round boundary when jobs arrived or finished since the last plan, or every ``replan_every``
rounds. A plan covers ``window_rounds`` rounds and is the MILP of :mod:`heuristics.shockwave_plan`:
maximise ``(1/(N T)) sum_j log(progress_j after the window) - k max_j remaining_j`` under the
capacity of each round and, per job, the finish-time-fairness constraint
``T_next + R_j / share <= rho_max F_hat_j`` (``T_next``: the end of the window, ``R_j``: the
remaining time after it, ``share = min(1, GPUs / jobs)``, ``F_hat_j``: the smoothed fair finish
time of :mod:`heuristics.shockwave_estimate`). If those constraints cannot all hold, they are
dropped and each lagging job's log-progress is boosted by ``rho_hat_j ** lam``
(``rho_hat_j ** near_done_power`` for a lagging job with less than a round left, as Shockwave's
``priority_M``). Ours: ``rho_hat_j = (now - submit_j + R_j / share) / (F_hat_j - submit_j)``, the
projected finish-time fairness measured from submission (Shockwave divides absolute timestamps,
``(now + R_j / share) / F_hat_j``, so a job's lag depends on when the experiment started; the
constraint above is written the same way, identical for ``rho_max = 1``; ``lag_from=start`` boosts
as Shockwave does, which ``benchmarks/reproduce.py`` runs); and when a boost would
exceed ``boost_cap`` all are scaled down by the same factor (Shockwave's are unbounded: 2**100).
In the ``dynamic`` scenario the constraint is nearly always infeasible (Shockwave's too: a job
that would finish inside the window is still projected to finish at ``T_next``), so Shockwave
runs on the boosts.

Remaining times are the Dirichlet estimates over the job's batch-size regimes; the policy never
reads ``JobSpec.duration`` or ``JobSpec.speed_phases`` (see :mod:`heuristics.shockwave_estimate`
for exactly what it reads).

A plan is kept as the rounds each job gets in the window (the MILP's rounds are interchangeable).
A round runs, in this order: the jobs within their lease (``min_run_rounds``, ours: each start
pays the restart overhead, see :class:`heuristics.shockwave_rounds.Leases`); the plan's jobs for
this round (:func:`heuristics.shockwave_plan.next_round`, ours: those that must run now to get
their rounds, then by boost, running ones first, the most lagging); then the work-conserving
fill: the other jobs by longest estimated remaining time. :mod:`heuristics.shockwave_rounds`
places the round and preempts the running jobs outside it (not gracefully; the ``dynamic``
scenario checkpoints every round, so no work is lost, and each resume pays the restart
overhead). Between boundaries the policy does nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np

from envs.sim import libm
from envs.sim.policy import Action, ClusterView, FewestJobsReclaim, JobStatus
from envs.sim.settings import Check, Choice, Each, Flag, Num, SettingError, Settings
from heuristics.registry import register
from heuristics.shockwave_estimate import RegimeObserver
from heuristics.shockwave_plan import (
    LOG_POINTS,
    PlanInput,
    SolverLimits,
    chord_lines,
    next_round,
    solve,
    tangent_lines,
)
from heuristics.shockwave_rounds import Leases, capacity, round_actions

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShockwaveConfig(Settings):
    """:param round_s: seconds per round (Shockwave: 120).
    :param window_rounds: rounds a plan covers, ``T`` (Shockwave: 20).
    :param replan_every: re-plan after this many rounds even if no job arrived or finished.
    :param k: weight of the largest remaining time in seconds (Shockwave: 1e-3).
    :param rho_max: finish-time fairness bound (Shockwave: 1.0).
    :param lam: boost exponent of a lagging job when the bound is dropped (Shockwave: 12).
    :param near_done_power: boost exponent of a lagging job with less than a round left
        (Shockwave: 100).
    :param boost_cap: largest boost; when a boost would exceed it, all are scaled down by the same
        factor (ours: keeps the MILP's coefficients in a solver's numerical range). Scaling every
        boost down weighs the makespan term ``k z`` up against all of them: Shockwave's boosts are
        unbounded, and ``benchmarks/reproduce.py`` runs it with 1e18 (every objective coefficient
        below HiGHS's ``infinite_cost``, 1e20).
    :param boost_floor: smallest weight after that scaling (ours).
    :param momentum: weight of the time average in the smoothed fair finish time (Shockwave: 0.9).
    :param fairness: enforce the finish-time-fairness constraint, and boost when it cannot hold
        (off: the objective alone, every weight 1).
    :param time_limit_s: HiGHS time limit per call, a safety net (Shockwave: 15 s for Gurobi /
        MOSEK); a plan it cuts short is not reproducible (logged).
    :param node_limit: HiGHS branch-and-bound nodes per call: the deterministic budget (ours).
    :param max_binaries: largest full MILP (jobs x rounds) tried when the counts do not pack (ours).
    :param mip_rel_gap: relative optimality gap (Shockwave: 1e-3).
    :param log_approx: ``tangent`` (cuts touching log at ``log_points``, above it) or ``chord``
        (Shockwave's interpolation between ``log_points``, below it, log(0) read as log(1e-6)).
    :param log_points: tangent points in (0, 1], or the breakpoints of the chords in [0, 1].
    :param min_run_rounds: a started job keeps its GPUs for at least this many consecutive rounds
        (ours: a lease; each start pays the restart overhead; doubled for a job each time a
        preemption cost it work, see ``shockwave_rounds.Leases``).
    :param lag_from: what the boosts' projected finish-time fairness ``rho_hat`` measures from:
        ``submit`` (ours, the module docstring's) or ``start``, Shockwave's repository's
        ``(now + R_j / share) / F_hat_j`` over absolute timestamps, the experiment starting at 0
        (the first job's submission: every scenario rebases its jobs' submit times to it)."""

    round_s: Annotated[float, Num(ge=1)] = 120.0
    window_rounds: Annotated[int, Num(ge=1, le=1000)] = 20
    replan_every: Annotated[int, Num(ge=1)] = 8
    k: Annotated[float, Num(ge=0)] = 1e-3
    rho_max: Annotated[float, Num(gt=0)] = 1.0
    lam: Annotated[float, Num(ge=0)] = 12.0
    near_done_power: Annotated[float, Num(ge=0)] = 100.0
    boost_cap: Annotated[float, Num(ge=1)] = 1e4
    boost_floor: Annotated[float, Num(gt=0, le=1)] = 1e-4
    momentum: Annotated[float, Num(ge=0, lt=1)] = 0.9
    fairness: Annotated[bool, Flag()] = True
    time_limit_s: Annotated[float, Num(gt=0)] = 30.0
    node_limit: Annotated[int, Num(ge=1)] = 2000
    mip_rel_gap: Annotated[float, Num(ge=0, lt=1)] = 1e-3
    max_binaries: Annotated[int, Num(ge=1)] = 4000
    log_approx: Annotated[str, Choice(("tangent", "chord"))] = "tangent"
    log_points: Annotated[tuple[float, ...], Each(Num(ge=0, le=1), 1)] = LOG_POINTS
    min_run_rounds: Annotated[int, Num(ge=1)] = 3
    lag_from: Annotated[str, Choice(("submit", "start"))] = "submit"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.log_approx == "chord" and len(self.log_points) < 2:  # no chord between fewer points
            raise SettingError(type(self).__name__, "log_points", _CHORDS, self.log_points)


_CHORDS = Check(lambda v: len(v) >= 2, "must hold at least 2 breakpoints with log_approx=chord", "0.5")


@dataclass(frozen=True)
class PlanRecord:
    """One re-plan, for benchmarks: when, how many jobs, which outcome, how long."""

    time: float
    jobs: int
    status: str
    relaxed: bool
    seconds: float


@dataclass
class Shockwave:
    config: ShockwaveConfig = field(default_factory=ShockwaveConfig)
    name: str = "shockwave"
    borrows: bool = False

    def __post_init__(self) -> None:
        self.round_s: float | None = self.config.round_s
        self.observer = RegimeObserver()
        c = self.config
        if c.log_approx not in ("tangent", "chord"):
            raise ValueError(f"ShockwaveConfig.log_approx must be 'tangent' or 'chord', got {c.log_approx!r}")
        self._lines = tangent_lines(c.log_points) if c.log_approx == "tangent" else chord_lines(c.log_points)
        self._limits = SolverLimits(c.time_limit_s, c.node_limit, c.mip_rel_gap, c.max_binaries)
        self.plans: list[PlanRecord] = []
        self._jobs: tuple[int, ...] = ()  # the jobs of the current plan
        self._counts = np.zeros(0, dtype=np.int64)  # rounds each still has in the plan
        self._gpus = np.zeros(0, dtype=np.int64)
        self._capacity = 0
        self._left = 0  # rounds left in the plan's window
        self._at = 0  # rounds run since the plan was made
        self._priority: list[tuple[float, float, int]] = []  # (-weight, -rho_hat, job) per plan job
        self._remaining: dict[int, float] = {}
        self._leases = Leases(c.min_run_rounds)
        self._reclaim = FewestJobsReclaim()

    # ------------------------------------------------------------------ decisions
    def decide(self, view: ClusterView) -> Iterator[Action]:
        self.observer.observe(view)
        if not view.round_tick:
            return
        active = tuple(sorted([*view.pending, *(j for j in view.running if view.status_of(j) == JobStatus.RUNNING)]))
        if not active or capacity(view) == 0:
            return
        self._leases.tick(view)
        if active != self._jobs or self._at >= self.config.replan_every or self._left <= 0:
            self._plan(view, active, changed=set(active) != set(self._jobs))
        held = self._leases.held(active)
        chosen = [j for j in (self._jobs[i] for i in self._next(view, set(held))) if j not in set(held)]
        taken = {*held, *chosen}
        rest = sorted((j for j in active if j not in taken), key=lambda j: (-self._remaining[j], j))
        yield from round_actions(view, [*held, *chosen, *rest])

    def _next(self, view: ClusterView, held: set[int]) -> list[int]:
        """Indices (into the plan's jobs) of this round's planned jobs, most wanted first: jobs
        within their lease (``held``), then by boost, running ones, the most lagging."""
        running = [view.status_of(j) == JobStatus.RUNNING for j in self._jobs]
        leased = [j in held for j in self._jobs]
        order = sorted(
            range(len(self._jobs)),
            key=lambda i: (not leased[i], self._priority[i][0], not running[i], *self._priority[i][1:]),
        )
        chosen = next_round(self._counts, self._left, self._gpus, self._capacity, order)
        self._counts[chosen] -= 1
        self._left -= 1
        self._at += 1
        return chosen

    def _plan(self, view: ClusterView, active: tuple[int, ...], changed: bool) -> None:
        c = self.config
        now = view.now
        for j in set(self._jobs) - set(active):
            self.observer.forget(j)
        gpus_total = capacity(view)
        share = max(min(1.0, gpus_total / len(active)), 1e-9)
        est = [self.observer.estimate(view, j) for j in active]
        progress = np.array([e[0] for e in est])
        remaining = np.maximum(np.array([e[1] for e in est]), 1.0)
        self._remaining = dict(zip(active, remaining.tolist(), strict=True))
        submit = np.array([view.job(j).submit_time for j in active])
        if changed:
            for i, j in enumerate(active):
                fair = submit[i] + (est[i][2] + remaining[i]) / share
                self.observer.record_fair_finish(j, now, float(fair))
        fair_hat = np.array([self.observer.fair_finish(j, now, c.momentum) for j in active])
        gpus = np.array([view.job(j).num_gpus for j in active], dtype=np.int64)
        t_next = now + c.window_rounds * c.round_s
        base = PlanInput(
            gpus=gpus,
            remaining=remaining,
            progress=np.minimum(progress, 1.0 - 1e-9),
            weights=np.ones(len(active)),
            capacity=gpus_total,
            rounds=c.window_rounds,
            round_s=c.round_s,
            k=c.k,
            lines=self._lines,
        )
        # finish-time fairness of the projection, measured from submission (ours; Shockwave divides
        # absolute timestamps, which makes a job's lag depend on when the experiment started)
        origin = submit if c.lag_from == "submit" else np.zeros_like(submit)
        rho_hat = np.nan_to_num((now - origin + remaining / share) / np.maximum(fair_hat - origin, 1.0), posinf=1e9)
        weights = base.weights
        if c.fairness:
            lower = remaining - share * (submit + c.rho_max * (fair_hat - submit) - t_next)
            plan = solve(_with(base, lower=lower), self._limits)
        else:
            plan = solve(base, self._limits)
        relaxed = c.fairness and plan.status == "infeasible"
        if relaxed:
            lagging = rho_hat > c.rho_max
            power = np.where(remaining < c.round_s, c.near_done_power, c.lam)
            # in log space: rho_hat ** power overflows; past boost_cap every boost is scaled by the
            # same factor, so the most lagging job still counts most (ours)
            log_boost = np.where(lagging, power * libm.log(np.maximum(rho_hat, 1.0)), 0.0)
            log_boost -= max(0.0, float(log_boost.max()) - math.log(c.boost_cap))
            weights = libm.exp(np.maximum(log_boost, math.log(c.boost_floor)))
            plan = solve(_with(base, weights=weights), self._limits)
        self.plans.append(PlanRecord(now, len(active), plan.status, relaxed, plan.seconds))
        self._jobs = active
        self._counts = plan.x.sum(axis=1).astype(np.int64)
        self._gpus = gpus
        self._capacity = gpus_total
        self._left = c.window_rounds
        self._at = 0
        self._priority = [(-float(weights[i]), -float(rho_hat[i]), j) for i, j in enumerate(active)]
        logger.debug(
            "[t=%.1f] plan for %d jobs: %s%s in %.3f s, %d job-rounds",
            now,
            len(active),
            plan.status,
            " (relaxed)" if relaxed else "",
            plan.seconds,
            int(self._counts.sum()),
        )

    def reclaim(self, view: ClusterView, k: int) -> list[int]:
        return list(self._reclaim.reclaim(view, k))


def _with(inp: PlanInput, **changes: object) -> PlanInput:
    return dataclasses.replace(inp, **changes)  # type: ignore[arg-type]


def shockwave(config: ShockwaveConfig | None = None) -> Shockwave:
    return Shockwave(config or ShockwaveConfig())


register("shockwave", shockwave, ShockwaveConfig)
