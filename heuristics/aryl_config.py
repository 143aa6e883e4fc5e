"""What Aryl's parts share: its settings, and the phase-1 order its room and scaling components
walk (so that ``aryl_scaling`` needs nothing from ``aryl``, which builds on it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Protocol

from envs.sim.policy import ClusterView
from envs.sim.settings import Choice, Flag, Num, Settings
from heuristics.common import TYPE_ORDERS, Size


@dataclass(frozen=True)
class ArylConfig(Settings):
    """Settings of ``aryl``, ``aryl-basic``, ``aryl-nogroup`` and ``afs``.

    :param age_bound_s: a pending job that has waited this long goes to the front of phase 1 and
        blocks backfill past it (ours: the paper's phase 1 "avoids starvation" without a rule).
    :param restart_base_s: the policy's estimate of the fixed restart cost of a rescale (the
        engine's ``sim.restart_base_s``), charged to knapsack options that change a job.
    :param restart_per_gpu_s: the same, per GPU of the new allocation.
    :param churn_factor: multiplies that restart cost in the knapsack values; 0 = rescale freely.
    :param make_room: phase 1 may take flexible workers back to start pending jobs.
    :param rescue: an elastic job whose base sits on a server being reclaimed is re-based onto its
        other workers (a restart) instead of being preempted at the deadline (ours).
    :param elastic_loaned_first: elastic jobs try loaned inference servers before training
        servers (Aryl section 5.3; ``aryl-nogroup`` always tries training servers first).
    :param checkpoint_interval_s: the policy's estimate of the checkpoint interval, for the
        GPU-hours a reclaim preemption loses (reclaim tie-breaker).
    :param type_order: the order of a pool's GPU types a job allows: ``fastest`` first for it or
        the cluster's ``listed`` order (``heuristics.common.TYPE_ORDERS``).
    :param max_ratio: phase 2 gives an elastic job at most this many GPUs per GPU it requests
        (``floor(num_gpus x max_ratio)``, never below its ``min_gpus`` nor above its ``max_gpus``);
        0 = up to its ``max_gpus``. Aryl "restricts itself to limited elasticity" (section 2): where
        jobs could scale further (``benchmarks/reproduce.py``'s AFS setting, whose jobs scale
        without bound as AFS assumes), Aryl keeps to its range with this.
    """

    age_bound_s: Annotated[float, Num(gt=0)] = 12 * 3600.0
    restart_base_s: Annotated[float, Num(ge=0)] = 30.0
    restart_per_gpu_s: Annotated[float, Num(ge=0)] = 1.0
    churn_factor: Annotated[float, Num(ge=0)] = 1.0
    make_room: Annotated[bool, Flag()] = True
    rescue: Annotated[bool, Flag()] = True
    elastic_loaned_first: Annotated[bool, Flag()] = True
    checkpoint_interval_s: Annotated[float, Num(ge=0)] = 1800.0
    type_order: Annotated[str, Choice(TYPE_ORDERS)] = "fastest"
    max_ratio: Annotated[float, Num(ge=0)] = 0.0


class Phase1Order(Protocol):
    """Aryl's phase-1 order of the pending jobs, as the room and scaling components read it
    (``heuristics.aryl.ArylOrdering``)."""

    def plan_order(self, view: ClusterView, fits: Callable[[Size], bool] = ...) -> Iterator[tuple[int, bool]]:
        """(job, aged) in the order phase 1 tries them (see ``ArylOrdering.plan_order``)."""
        ...

    def oldest_aged(self, view: ClusterView) -> int | None:
        """The first pending job past the age bound, or None."""
        ...
