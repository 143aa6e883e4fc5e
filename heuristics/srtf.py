"""SRTF: shortest remaining time first, preemptive (the clairvoyant reference of Tiresias' paper).

``srtf`` ranks and starts pending jobs as ``sjf`` does (shortest remaining run time first, with
backfill, elastic jobs at their max size where it fits), and every ``round_s`` it preempts: a
pending job that does not fit takes the GPUs of running jobs on one GPU type it allows, the
longest remaining first, each of which has at least ``factor`` times its remaining run time
(so a preempted job cannot preempt back the job that took its place, and a job close to its end
is left alone). The walk goes shortest first and stops at the first job that no running job is
``factor`` times longer than. Preemption is Tiresias' own (``Preempt``: the GPUs free at once,
the work since the last periodic checkpoint is lost, and the restart is paid again).

It reads durations as the run reveals them: true ones at ``clairvoyant``, estimates at
``estimate``. ``oracle-srtf`` is the same policy with the truth at every level: the preemption
seat's and the ordering seat's headroom together where durations are hidden.

``srsf`` is Tiresias' other clairvoyant reference, shortest remaining *service* first: the same
policy with a job's remaining run time times its requested GPUs in place of its remaining run
time, in the ranking and in the preemption rule alike (so a wide job counts as long as its GPUs
make it). ``oracle-srsf`` sees the truth at every level.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Annotated

from envs.sim.model import JobSpec, Pool
from envs.sim.policy import Action, ClusterView, ComposedScheduler, JobStatus, Preempt
from envs.sim.settings import Choice, Num
from heuristics.common import STARTS, PackConfig, PackPlacement, Remaining, Victim, start_sizes, take_room, types_for
from heuristics.fifo import QueueOrdering, by_remaining, requested
from heuristics.registry import register

_PENDING, _RUNNING = JobStatus.PENDING, JobStatus.RUNNING


def revealed(view: ClusterView, job: int) -> float:
    """A job's remaining run time as the run reveals it (``srtf``'s)."""
    return view.remaining_work(job)


def service(view: ClusterView, job: int) -> float:
    """A job's remaining GPU-service as the run reveals it: remaining run time x requested GPUs
    (``srsf``'s)."""
    return view.remaining_work(job) * view.job(job).num_gpus


def by_service(view: ClusterView, job: int) -> tuple[float, ...]:
    return (service(view, job), view.job(job).submit_time, job)


@dataclass
class ShortestRemainingFirst(QueueOrdering):
    """The ``ordering`` and ``preemption`` seats of ``srtf`` (see the module docstring): ``sjf``'s
    ranking, a preemption round every ``round_s``, and the GPU types the jobs it preempted for
    kept for them (a :class:`~envs.sim.policy.Keeper`): while such a job waits for its victims'
    checkpoints, no job ranked behind it starts on a type it allows, whoever orders the starts."""

    key: Callable[[ClusterView, int], tuple[float, ...]] = by_remaining
    blocking: bool = False
    gpus: Callable[[JobSpec], int] = requested
    factor: float = 8.0
    elastic: str = "max"  # the placement's elastic starts (what a job that fits will take)
    remaining: Callable[[ClusterView, int], float] = revealed  # what the preemption rule compares
    _waiting: dict[int, tuple[float, frozenset[str]]] = field(default_factory=dict, init=False, repr=False)

    def keeping(self, view: ClusterView) -> None:
        waiting = self._waiting
        for job in [j for j in waiting if view.status_of(j) != _PENDING]:
            del waiting[job]
        self.take_in(view)  # (at every decision point: gittins' keys change with its history)

    def kept_from(self, view: ClusterView, job: int) -> bool:
        """Whether ``job`` would take GPUs kept for a shorter job (one it ranks behind)."""
        waiting = self._waiting
        if not waiting or job in waiting:
            return False
        remaining, spec = self.remaining(view, job), view.job(job)
        return any(r < remaining and _shares(spec, t) for r, t in waiting.values())

    def preempt(self, view: ClusterView) -> Iterator[Action]:
        if not view.round_tick or not view.pending:
            return
        self._waiting.clear()
        victims: dict[str, list[Victim]] = {}  # type -> (remaining, job, GPUs), longest first
        for job in view.running:
            status, gpu_type, base, _ = view.allocation(job)
            if status != _RUNNING or gpu_type is None or any(view.servers[s].pool != Pool.TRAINING for s, _ in base):
                continue
            victims.setdefault(gpu_type, []).append((self.remaining(view, job), job, view.workers(job)))
        if not victims:
            return
        for rows in victims.values():
            rows.sort(key=lambda r: (-r[0], r[1]))
        longest = max(rows[0][0] for rows in victims.values())
        free = {t: view.total_free(t, p) for t, p in view.pool_types() if p == Pool.TRAINING}
        for remaining, job in sorted((self.remaining(view, j), j) for j in view.pending):
            if longest < self.factor * remaining:
                return  # no running job is long enough for this one or any behind it
            spec = view.job(job)
            need = requested(spec)
            types = types_for(view, spec, Pool.TRAINING, need)
            fit = next((t for t in types if free[t] >= need), None)
            if fit is not None:  # it starts without a preemption (the starts go in this order too)
                free[fit] -= next(n for n in start_sizes(spec, self.elastic) if n <= free[fit])
                continue
            for t in types:
                jobs = take_room(victims.get(t, []), free, t, need, self.factor * remaining)
                if jobs is not None:
                    yield from (Preempt(j, graceful=True) for j in jobs)
                    self._waiting[job] = (remaining, frozenset(types))
                    break


def _shares(spec: JobSpec, types: frozenset[str]) -> bool:
    """Whether a job may run on one of ``types``."""
    return spec.gpu_types is None or not spec.gpu_types.isdisjoint(types)


@dataclass(frozen=True)
class SrtfConfig(PackConfig):
    """Settings of ``srtf`` and ``oracle-srtf``.

    :param type_order: ``fastest`` or ``listed`` (``heuristics.common.TYPE_ORDERS``).
    :param elastic: ``max`` or ``requested`` (``heuristics.common.ELASTIC_STARTS``).
    :param round_s: seconds between two preemption rounds.
    :param factor: a running job is preempted for a pending one only if its remaining run time
        (``srsf``: GPU-service) is at least this many times the pending job's."""

    round_s: Annotated[float, Num(ge=1)] = 900.0
    factor: Annotated[float, Num(gt=1)] = 8.0


def preemptive(
    name: str, ordering: ShortestRemainingFirst, c: SrtfConfig, remaining: Remaining | None = None
) -> ComposedScheduler:
    """``ordering`` in the ordering and preemption seats, packed starts (whose ``earliest-finish``
    reads ``remaining``, if given, in place of what the run reveals), a round every ``c.round_s``."""
    return ComposedScheduler(
        name,
        ordering,
        PackPlacement.of(c, remaining),
        preemption=ordering,
        round_s=c.round_s,
    )


def srtf(config: SrtfConfig | None = None) -> ComposedScheduler:
    c = config or SrtfConfig()
    return preemptive("srtf", ShortestRemainingFirst(factor=c.factor, elastic=c.elastic), c)


@dataclass(frozen=True)
class SrsfConfig(SrtfConfig):
    """Settings of ``srsf`` and ``oracle-srsf``: ``srtf``'s, with a ``factor`` of 2 and a round
    of 300 s, the best of factors 2, 4, 8, 16, 32 and rounds of 300 and 900 s on ``default``'s
    training seeds 0-19."""

    round_s: Annotated[float, Num(ge=1)] = 300.0
    factor: Annotated[float, Num(gt=1)] = 2.0


def srsf(config: SrsfConfig | None = None, name: str = "srsf") -> ComposedScheduler:
    c = config or SrsfConfig()
    return preemptive(
        name, ShortestRemainingFirst(key=by_service, factor=c.factor, elastic=c.elastic, remaining=service), c
    )


@dataclass(frozen=True)
class SrsfEftConfig(SrsfConfig):
    """Settings of ``srsf-eft``: ``srsf``'s, starting by ``earliest-finish``."""

    start: Annotated[str, Choice(STARTS)] = "earliest-finish"


def srsf_eft(config: SrsfEftConfig | None = None) -> ComposedScheduler:
    """``srsf`` that starts a job only where that ends it no later than waiting for faster GPUs
    would (``start="earliest-finish"``, ``heuristics.common.STARTS``)."""
    return srsf(config or SrsfEftConfig(), "srsf-eft")


register("srtf", srtf, SrtfConfig)
register("oracle-srtf", srtf, SrtfConfig, oracle=True)
register("srsf", srsf, SrsfConfig)
register("oracle-srsf", srsf, SrsfConfig, oracle=True)
register("srsf-eft", srsf_eft, SrsfEftConfig)
