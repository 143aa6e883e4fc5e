"""MLFS (Wang, Liu, Shen, "Job scheduling for large-scale machine learning clusters", CoNEXT'20):
ML-feature priorities, ideal-virtual-host placement, and load control.

Registered policies (neither borrows from the inference cluster; neither preempts):

- ``mlfs``: MLF-H, the paper's heuristic. Pending jobs are started in order of the task priority
  ``P = alpha P_ML + (1 - alpha) P_C`` (``heuristics/mlfs_priority.py``) with backfill, each on the
  server closest to the ideal virtual host among those that stay below 90% on every resource;
  load control migrates the lowest-priority tasks off overloaded servers every round and, when
  the system is overloaded, stops the jobs that allow it at their required accuracy
  (``heuristics/mlfs_load.py``).
- ``mlfs-noctl``: the paper's ablation, load control off: no migration, no early stop (and the
  remaining-time term counts the whole remaining work, since nothing is stopped).
- ``mlfs-hopeless`` (ours): ``mlfs`` with ``hopeless`` on, the strongest deadline baseline a
  clairvoyant scheduler sensibly is. MLFS keeps ranking (by its deadline term, highest near the
  deadline) and running jobs that can no longer meet their deadline; this variant ranks them
  after every pending job that still can, and preempts running ones (gracefully: no work lost)
  for such a job that finds no room (``heuristics.mlfs_priority.hopeless``,
  ``MlfsLoadControl._demotions``). They still run to their end, at the lowest priority: a late
  job still counts in the JCT, and ``deadline_hit_ratio`` counts it a miss whether it ends late
  or never. It extends MLFS's own guard (a job past its deadline gets no deadline term) to the
  jobs whose deadline is already lost, and keeps MLFS's load control, which carries its gain.

MLF-RL, the paper's RL policy trained on the heuristic's decisions, is our demos -> behaviour
cloning -> PPO pipeline with ``mlfs`` as the expert; hence ``mlfs`` is a
:class:`~envs.sim.policy.ComposedScheduler`: ``ordering`` = :class:`MlfsOrdering` (the priority
ranking, what the ordering env's expert follows), ``placement`` =
:class:`~heuristics.mlfs_load.MlfsPlacement`, ``preemption`` =
:class:`~heuristics.mlfs_load.MlfsLoadControl` (acting first at every decision point: early
stops, then, on rounds, migrations). A model-parallel job runs as one gang (its tasks are its
workers); its task tree enters its priority, and it starts, moves and stops as a unit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from envs.sim.policy import ClusterView, ComposedScheduler, NoPreemption
from heuristics.common import TRAINING_ONLY, free_gpus
from heuristics.mlfs_load import Accounting, MlfsLoadControl, MlfsPlacement
from heuristics.mlfs_priority import Hopeless, MlfsConfig, ranked
from heuristics.registry import register

__all__ = ["MlfsConfig", "MlfsOrdering", "mlfs", "mlfs_hopeless", "mlfs_noctl"]


@dataclass
class MlfsOrdering:
    """Pending jobs by decreasing priority (normalised over the queue), then submit time, id
    (:func:`~heuristics.mlfs_priority.ranked`). Non-blocking: a job that does not fit is skipped."""

    config: MlfsConfig
    lost: Hopeless | None = None  # with ``config.hopeless``: hopeless jobs rank last
    blocking: bool = False

    def rank(self, view: ClusterView) -> Iterator[int]:
        if free_gpus(view, TRAINING_ONLY) == 0:
            return
        for job in ranked(view, list(view.pending), self.config, self.lost):
            if free_gpus(view, TRAINING_ONLY) == 0:
                return
            yield job


def build(name: str, config: MlfsConfig) -> ComposedScheduler:
    accounting = Accounting(config)
    placement = MlfsPlacement(config, accounting)
    lost = Hopeless(config) if config.hopeless else None
    control = config.migration or config.early_stop or config.hopeless
    return ComposedScheduler(
        name,
        ordering=MlfsOrdering(config, lost),
        placement=placement,
        preemption=MlfsLoadControl(config, accounting, placement, lost) if control else NoPreemption(),
        round_s=config.round_s,
    )


def mlfs(config: MlfsConfig | None = None) -> ComposedScheduler:
    return build("mlfs", config or MlfsConfig())


def mlfs_noctl(config: MlfsConfig | None = None) -> ComposedScheduler:
    return build("mlfs-noctl", replace(config or MlfsConfig(), migration=False, early_stop=False))


def mlfs_hopeless(config: MlfsConfig | None = None) -> ComposedScheduler:
    return build("mlfs-hopeless", replace(config or MlfsConfig(), hopeless=True))


register("mlfs", mlfs, MlfsConfig)
register("mlfs-noctl", mlfs_noctl, MlfsConfig)
register("mlfs-hopeless", mlfs_hopeless, MlfsConfig)
