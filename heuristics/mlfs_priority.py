"""MLFS's configuration and its task priority (ALGORITHMS.md, "MLFS").

For task ``k`` of job ``J`` at time ``t``::

    P'_ML(k) = L_J * (1 / I) * (dl_{I-1} / sum_{j<I} dl_j) * S_k / S_J
    P'_C(J)  = g_d / (d - t) + g_r / r + g_w * w
    P(k)     = alpha * P'_ML(k) / M_ML + (1 - alpha) * P'_C(J) / M_C
    P^(k)    = P(k) + gamma * sum of P^(c) over the tasks c that depend on k

- ``L_J``: urgency (``JobSpec.urgency``); ``I``: the current iteration, 1-based (``floor(f N) + 1``
  at work fraction ``f`` of a job of ``N`` iterations); ``dl_{I-1} / sum_{j<I} dl_j``: the share of
  the loss reduction so far that the last iteration brought (``LearningCurve.last_share``: 1 at
  ``I = 1``, ours); ``S_k / S_J``: the task's share of the model (1 for a data-parallel job).
- ``d - t``: time to the deadline; ``r``: remaining run time (the remaining work alone at the
  requested GPUs; with early stopping on, up to the predicted stop at the required accuracy,
  ours); ``w``: time waited so far without GPUs. **Units (ours)**: hours (``time_unit_s``), so
  that the three terms are of comparable size for jobs of hours. **Guards (ours)**: ``d - t`` and
  ``r`` are floored at ``min_time_s``; a job past its deadline or without one gets no deadline
  term (its deadline can no longer be helped); ``I`` starts at 1.
- **Normalisation (ours)**: before mixing, ``P'_ML`` and ``P'_C`` are divided by their maxima
  ``M_ML`` (over every task) and ``M_C`` over the jobs being compared: the pending queue when
  ordering it, the running jobs when choosing what to migrate. Each term then lies in [0, 1]
  and alpha weighs like against like; a maximum of 0 makes its term 0.
- **Recursion**: a model-parallel job's tasks are given parents first, so one backward pass
  adds ``gamma`` x each task's total priority to its parent's. The job's priority is its root's
  (the largest, all terms being >= 0); a data-parallel job is one task.

The priority is a pure function of :class:`PriorityInputs`; :func:`inputs_of` reads them from
the view. What MLFS knows (ours): each job's true learning curve (a perfect stand-in for the
curve MLFS fits from the losses it observes), its urgency, deadline and required accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated

from envs.sim.accuracy import DEFAULT_CURVE
from envs.sim.model import JobSpec, Pool
from envs.sim.policy import ClusterView, JobStatus
from envs.sim.settings import Choice, Flag, Num, Settings
from envs.sim.throughput import packed_servers
from heuristics.common import TYPE_ORDERS


@dataclass(frozen=True)
class MlfsConfig(Settings):
    """Settings of ``mlfs`` and ``mlfs-noctl`` (``--set policy.<field>=value``).

    :param alpha: weight of the ML-feature priority (the paper: 0.3).
    :param gamma_d: weight of the deadline term of ``P'_C`` (0.3).
    :param gamma_r: weight of the remaining-time term (0.3).
    :param gamma_w: weight of the waiting-time term (0.35).
    :param gamma: share of the priorities of dependent tasks a task adds (0.8).
    :param time_unit_s: unit of ``d - t``, ``r`` and ``w`` in ``P'_C`` (ours: hours).
    :param min_time_s: floor on ``d - t`` and ``r`` (ours: the divisions stay finite).
    :param threshold: a server counts as overloaded above this utilisation of any resource, and
        placement keeps servers at or below it (the paper: 90%); the system is overloaded when
        jobs wait or the mean server load exceeds it.
    :param server_cpus: cores per server (ours: an AWS p3.16xlarge's 64 vCPUs).
    :param server_mem_gb: host memory per server (488 GiB).
    :param server_net_gbps: network per server (25 Gbit/s, the speed model's inter-server link).
    :param migration: load control, part 1: move the lowest-priority tasks off overloaded servers.
    :param early_stop: load control, part 2: when overloaded, stop the jobs that allow it once they
        reach their required accuracy (or their predicted best).
    :param lowest_share: migrate among this share of a server's tasks with the lowest priority
        (the paper: 10%; at least one).
    :param migration_cooldown_s: a job migrated is not moved again for this long (ours: no
        ping-pong as usage swings).
    :param min_gain: a job that allows an early stop also stops when the rest of its work would
        add less accuracy than this (its predicted best is reached; ours).
    :param round_s: period of the load-control rounds (ours: Tiresias' 5 minutes).
    :param type_order: ``fastest``: the ideal host among the servers of the fastest GPU type the
        job allows that has one below the threshold; ``listed``: among the servers of every type
        (the paper's rule; ``heuristics.common.TYPE_ORDERS``).
    :param hopeless: demote the jobs that can no longer meet their deadline (:func:`hopeless`;
        ours, off in the paper's MLFS): pending ones start only after every other pending job,
        and a running one yields its GPUs (graceful preemption, no work lost) to a pending job
        that can still meet its deadline. Hopeless jobs still run to their end.
    """

    alpha: Annotated[float, Num(ge=0, le=1)] = 0.3
    gamma_d: Annotated[float, Num(ge=0)] = 0.3
    gamma_r: Annotated[float, Num(ge=0)] = 0.3
    gamma_w: Annotated[float, Num(ge=0)] = 0.35
    gamma: Annotated[float, Num(ge=0)] = 0.8
    time_unit_s: Annotated[float, Num(gt=0)] = 3600.0
    min_time_s: Annotated[float, Num(gt=0)] = 60.0
    threshold: Annotated[float, Num(gt=0, le=1)] = 0.9
    server_cpus: Annotated[float, Num(gt=0)] = 64.0
    server_mem_gb: Annotated[float, Num(gt=0)] = 488.0
    server_net_gbps: Annotated[float, Num(gt=0)] = 25.0
    migration: Annotated[bool, Flag()] = True
    early_stop: Annotated[bool, Flag()] = True
    lowest_share: Annotated[float, Num(gt=0, le=1)] = 0.1
    migration_cooldown_s: Annotated[float, Num(ge=0)] = 1800.0
    min_gain: Annotated[float, Num(ge=0)] = 0.001
    round_s: Annotated[float, Num(ge=1)] = 300.0
    type_order: Annotated[str, Choice(TYPE_ORDERS)] = "fastest"
    hopeless: Annotated[bool, Flag()] = False


@dataclass(frozen=True, slots=True)
class PriorityInputs:
    """What the priority reads of one job (times in seconds).

    :param urgency: ``L_J``.
    :param iteration: ``I``, the current iteration (>= 1).
    :param last_share: ``dl_{I-1} / sum_{j<I} dl_j``.
    :param shares: ``S_k / S_J`` per task (``(1.0,)`` for a data-parallel job).
    :param parents: per task, the task it depends on (``-1``: the root); parents first.
    :param to_deadline_s: ``d - t``, or ``None`` without a deadline.
    :param remaining_s: ``r``.
    :param waiting_s: ``w``.
    """

    urgency: float
    iteration: int
    last_share: float
    shares: tuple[float, ...]
    parents: tuple[int, ...]
    to_deadline_s: float | None
    remaining_s: float
    waiting_s: float


def raw_ml(x: PriorityInputs) -> list[float]:
    """``P'_ML`` of each task."""
    base = x.urgency / max(1, x.iteration) * x.last_share
    return [base * s for s in x.shares]


def raw_c(x: PriorityInputs, cfg: MlfsConfig) -> float:
    """``P'_C`` of the job (guards in the module docstring)."""
    unit, floor = cfg.time_unit_s, cfg.min_time_s
    deadline = 0.0
    if x.to_deadline_s is not None and x.to_deadline_s > 0.0:
        deadline = cfg.gamma_d / (max(x.to_deadline_s, floor) / unit)
    remaining = cfg.gamma_r / (max(x.remaining_s, floor) / unit)
    return deadline + remaining + cfg.gamma_w * x.waiting_s / unit


def task_priorities(inputs: Sequence[PriorityInputs], cfg: MlfsConfig) -> list[list[float]]:
    """``P^`` of every task of every job, normalised over ``inputs`` (module docstring)."""
    ml = [raw_ml(x) for x in inputs]
    c = [raw_c(x, cfg) for x in inputs]
    m_ml = max((v for tasks in ml for v in tasks), default=0.0)
    m_c = max(c, default=0.0)
    a = cfg.alpha
    out = []
    for x, tasks, cj in zip(inputs, ml, c, strict=True):
        pc = (1.0 - a) * (cj / m_c if m_c > 0.0 else 0.0)
        p = [a * (v / m_ml if m_ml > 0.0 else 0.0) + pc for v in tasks]
        for k in range(len(p) - 1, 0, -1):
            parent = x.parents[k]
            if parent >= 0:
                p[parent] += cfg.gamma * p[k]
        out.append(p)
    return out


def priorities(inputs: Sequence[PriorityInputs], cfg: MlfsConfig) -> list[float]:
    """Each job's priority: its root task's ``P^``."""
    return [p[0] for p in task_priorities(inputs, cfg)]


_DATA_PARALLEL = ((1.0,), (-1,))


def work_end(spec: JobSpec, total: float, cfg: MlfsConfig) -> float:
    """The work at which the job ends: all of ``total``, or with early stopping on, where it
    reaches its required accuracy if it states one."""
    if cfg.early_stop and spec.required_accuracy is not None and spec.curve is not None:
        return min(total, spec.curve.fraction_for(spec.required_accuracy) * total)
    return total


def fastest_rate(view: ClusterView, spec: JobSpec) -> float:
    """The most work per second the job can make: at its most GPUs, packed on the fewest servers
    of the GPU type it allows that runs it fastest, nothing sharing them (nominal speeds)."""
    n = spec.max_gpus
    rates = [0.0]
    for name, pool in view.pool_types():
        if pool == Pool.TRAINING and spec.allows(view.gpu_type(name)):
            per_server = max(s.num_gpus for s in view.servers if s.gpu_type.name == name)
            rates.append(view.rate(spec.job_id, n, packed_servers(n, per_server), name))
    return max(rates)


def latest_start(view: ClusterView, job: int, cfg: MlfsConfig) -> float:
    """The last time from which ``job`` can still meet its deadline: the deadline less the work it
    must still do, up to :func:`work_end` (what it needs to end by its deadline), at
    :func:`fastest_rate`. Restarts still to come are not counted, so that no job is called
    hopeless too early. ``inf`` without a deadline; the deadline itself once that work is done
    (the job may end at any time then)."""
    spec = view.job(job)
    if spec.deadline is None:
        return math.inf
    done, total = view.work(job)
    left = work_end(spec, total, cfg) - done
    if not left > 0.0:
        return spec.deadline
    rate = fastest_rate(view, spec)
    return spec.deadline - left / rate if rate > 0.0 else -math.inf


def hopeless(view: ClusterView, job: int, cfg: MlfsConfig) -> bool:
    """Whether ``job`` can no longer meet its deadline, even alone at :func:`fastest_rate` from
    now on (a running job from the end of its restart): now is past its :func:`latest_start`."""
    begin = view.now
    if view.status_of(job) == JobStatus.RUNNING:
        begin = max(begin, view.restarting_until(job))
    return begin > latest_start(view, job, cfg)


@dataclass
class Hopeless:
    """:func:`hopeless`, remembered (what ``hopeless`` policies ask at every decision): a job
    found hopeless stays so (its work left cannot shrink faster than at its fastest rate), and
    a pending job's :func:`latest_start` is kept while it waits (its work left is fixed then).
    Each answer is :func:`hopeless`'s."""

    config: MlfsConfig
    _lost: set[int] = field(default_factory=set)
    _latest: dict[int, tuple[float, float]] = field(default_factory=dict)  # job -> (queued since, latest start)

    def __call__(self, view: ClusterView, job: int) -> bool:
        if job in self._lost:
            return True
        if view.status_of(job) == JobStatus.PENDING:
            since = view.queued_since(job)
            kept = self._latest.get(job)
            if kept is None or kept[0] != since:
                kept = (since, latest_start(view, job, self.config))
                self._latest[job] = kept
            lost = view.now > kept[1]
        else:
            lost = hopeless(view, job, self.config)
        if lost:
            self._lost.add(job)
            self._latest.pop(job, None)
        return lost


def inputs_of(view: ClusterView, job: int, cfg: MlfsConfig) -> PriorityInputs:
    """Read one job's priority inputs from the view (settled to now)."""
    spec = view.job(job)
    st = view.state(job)
    total = st.work_total
    frac = st.work_done / total if total > 0.0 else 1.0
    curve = spec.curve or DEFAULT_CURVE
    it = curve.iteration(frac)
    end = work_end(spec, total, cfg)
    if spec.tasks:
        shares = tuple(t.share for t in spec.tasks)
        parents = tuple(t.parent for t in spec.tasks)
    else:
        shares, parents = _DATA_PARALLEL
    return PriorityInputs(
        urgency=spec.urgency,
        iteration=it,
        last_share=curve.last_share(it),
        shares=shares,
        parents=parents,
        to_deadline_s=None if spec.deadline is None else spec.deadline - view.now,
        remaining_s=max(0.0, end - st.work_done),
        waiting_s=st.queued_time,
    )


def job_priorities(view: ClusterView, jobs: Sequence[int], cfg: MlfsConfig) -> dict[int, float]:
    """Priorities of ``jobs``, normalised over them."""
    return dict(zip(jobs, priorities([inputs_of(view, j, cfg) for j in jobs], cfg), strict=True))


def ranked(
    view: ClusterView, jobs: Sequence[int], cfg: MlfsConfig, lost: Callable[[ClusterView, int], bool] | None = None
) -> list[int]:
    """``jobs`` by decreasing priority (normalised over them), then submit time, id; with
    ``lost`` (a :class:`Hopeless`), the jobs that can still meet their deadline so, then the
    hopeless ones so (each group normalised over itself)."""
    groups = [list(jobs)]
    if lost is not None:
        gone = [lost(view, j) for j in jobs]
        groups = [
            [j for j, g in zip(jobs, gone, strict=True) if not g],
            [j for j, g in zip(jobs, gone, strict=True) if g],
        ]
    order: list[int] = []
    for group in groups:
        prio = job_priorities(view, group, cfg)
        order += sorted(group, key=lambda j: (-prio[j], view.job(j).submit_time, j))
    return order
