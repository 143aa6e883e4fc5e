"""Oracles: policies that see the truth whatever a run's information level.

An oracle's view is clairvoyant and shows the machines' true speed factors
(``envs/sim/information.py``). Oracles exist to measure a task's headroom (how much knowing more
is worth, seat by seat), never as baselines: their names start with ``oracle-`` and results flag
them.

- ``oracle-sjf``: ``sjf`` ranking by the true remaining run time (the ordering seat's headroom).
- ``oracle-aryl``: Aryl, its phase 1, knapsack and reclaim planned with true durations.
- ``oracle-speed``: ``qssf``'s ranking (it reads no duration) with :class:`TrueSpeedPlacement`,
  which places by the machines' true speeds (the placement seat's headroom where machines differ
  by a latent factor, as on ``cloud``).
- ``oracle-sjf-speed``: both seats' truths together.
- ``oracle-srsf-eft-speed``: ``srsf-eft`` (its ranking, preemption, and starts that wait for
  faster GPUs where that ends a job sooner) whose placement and wait read the machines' true
  speeds (:class:`TrueSpeedPlacement` with ``start="earliest-finish"``): the placement seat's
  headroom over srsf-eft, the best realistic heuristic on ``cloud``.
- ``oracle-mlfs-speed``: MLFS (its priorities, load control and migrations) whose starts are
  placed by :class:`TrueSpeedPlacement`: the placement seat's headroom over MLFS, the best
  realistic heuristic where machines differ (``cloud``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from envs.sim.model import JobSpec
from envs.sim.policy import Alloc, ClusterView, ComposedScheduler, Start
from heuristics.aryl import aryl
from heuristics.aryl_config import ArylConfig
from heuristics.common import TRAINING_ONLY, PackConfig, ReleaseMemo, pack, start_sizes, types_for, waits
from heuristics.fifo import QueueOrdering, by_remaining, sjf
from heuristics.mlfs import MlfsConfig
from heuristics.mlfs import build as build_mlfs
from heuristics.qssf import QssfOrdering
from heuristics.registry import register
from heuristics.srtf import SrsfEftConfig, srsf


@dataclass
class TrueSpeedPlacement:
    """Start a pending job on the one server where it runs fastest: the throughput model's rate
    on the server's GPU type times the machine's true speed factor (what only an oracle's view
    shows), the tightest fit among equals, then the lowest id; a gang no server holds is spread
    as :func:`heuristics.common.pack` spreads it. Training pool only. An elastic job starts at
    the size ``elastic`` gives (:func:`heuristics.common.start_sizes`), as the placement of the
    realistic policy it stands beside does.

    ``start``: as ``heuristics.common.STARTS``; with ``earliest-finish`` the wait for one faster
    server reads the true speed factors and run times (``heuristics.common.waits``)."""

    elastic: str = "max"
    start: str = "now"
    _released: ReleaseMemo = field(default_factory=lambda: ReleaseMemo(), init=False, repr=False, compare=False)

    @property
    def reconsiders(self) -> bool:
        """With ``start="earliest-finish"``: see ``policy.reconsiders``."""
        return self.start != "now"

    def place(self, view: ClusterView, job: int) -> Start | None:
        spec = view.job(job)
        for n in start_sizes(spec, self.elastic):
            alloc = self._one_server(view, spec, n) or pack(view, spec, n, TRAINING_ONLY)
            if alloc is not None:
                if self.start != "now":
                    factors = [s.speed_factor for s in view.servers]
                    if waits(view, spec, alloc, TRAINING_ONLY, self._released, factors):
                        return None
                return Start(job, alloc)
        return None

    @staticmethod
    def _one_server(view: ClusterView, spec: JobSpec, n: int) -> Alloc | None:
        best: tuple[float, int, int] | None = None
        for pool in TRAINING_ONLY:
            for t in types_for(view, spec, pool, n):
                rate = view.rate(spec.job_id, n, 1, t)
                for sid in view.servers_by_free(t, pool):
                    free = view.free(sid)
                    if free < n:
                        break  # most free first: the rest hold fewer
                    key = (-rate * view.servers[sid].speed_factor, free, sid)
                    if best is None or key < best:
                        best = key
        return None if best is None else ((best[2], n),)


def oracle_speed() -> ComposedScheduler:
    return ComposedScheduler("oracle-speed", QssfOrdering(), TrueSpeedPlacement())


def oracle_sjf_speed() -> ComposedScheduler:
    return ComposedScheduler("oracle-sjf-speed", QueueOrdering(by_remaining, blocking=False), TrueSpeedPlacement())


def oracle_srsf_eft_speed(config: SrsfEftConfig | None = None) -> ComposedScheduler:
    c = config or SrsfEftConfig()
    eft = srsf(c, "oracle-srsf-eft-speed")
    return dataclasses.replace(eft, placement=TrueSpeedPlacement(elastic=c.elastic, start=c.start))


def oracle_mlfs_speed(config: MlfsConfig | None = None) -> ComposedScheduler:
    mlfs = build_mlfs("oracle-mlfs-speed", config or MlfsConfig())  # MLFS starts every job at its requested size
    return dataclasses.replace(mlfs, placement=TrueSpeedPlacement(elastic="requested"))


register("oracle-sjf", sjf, PackConfig, oracle=True)
register("oracle-aryl", aryl, ArylConfig, oracle=True)
register("oracle-speed", oracle_speed, oracle=True)
register("oracle-sjf-speed", oracle_sjf_speed, oracle=True)
register("oracle-srsf-eft-speed", oracle_srsf_eft_speed, SrsfEftConfig, oracle=True)
register("oracle-mlfs-speed", oracle_mlfs_speed, MlfsConfig, oracle=True)
