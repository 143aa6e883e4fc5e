"""MLFS's resource accounting, its placement and its load control.

**Resources.** A server's utilisation is a vector over (GPU, CPU, memory, network), each in
units of the server's capacity. GPUs are what the engine enforces (used / total GPUs). CPU,
memory and network are *accounted* here from the jobs' demands (``JobSpec.demand``,
``JobSpec.comm_gb``, ``envs/sim/accuracy.py``) over the capacities in :class:`MlfsConfig`;
nothing in the simulator enforces them. On a server where job ``j`` holds ``g`` of its ``G``
GPUs, at work fraction ``f``:

- CPU = ``demand.cpus(g, f) / server_cpus``; memory = ``demand.mem_gb(g, f) / server_mem_gb``
  (per-GPU use plus one task process, times the job's usage swing);
- network (ours) = ``(g / G) * comm_gb * 8 / iteration_s / server_net_gbps`` if ``j`` spans
  several servers (its iterations' exchange crosses the NICs, shared in proportion to its GPUs
  there; ``iteration_s = duration / curve.iterations``), else 0 (NVLink inside a server).

A job without a demand uses no CPU or memory; one without a curve, no network.

**Placement** (:class:`MlfsPlacement`): the *ideal virtual host* (ours, after the paper's "fully
utilize resources") is a server that, once the job is on it, has all its GPUs busy and every
other resource exactly at the threshold ``h``: the vector ``(1, h, h, h)``. Among the servers
that stay at or below ``h`` on CPU, memory and network with the job (GPUs are bounded by their
capacity instead: a 90% bound on 8-GPU servers would idle a GPU in each), the job goes to the one
whose post-placement utilisation is closest to it (Euclidean): best fit, on every resource.
One server if any can take the whole gang; otherwise it is spread, taking servers with the most
free GPUs first (fewest servers: the least network) and the last one by the same closeness.
Liveness guard (ours): a resource that the job alone would push past ``h`` only requires the
server to be otherwise idle on it, so every job can run on an empty server.

**Load control** (:class:`MlfsLoadControl`, the ``preemption`` seat: it acts before the starts):

1. *Early stop*: when the system is overloaded (jobs wait, or the mean over servers of their
   most-used resource exceeds ``h``), every running job that allows it (it has a required
   accuracy) and has reached it, or whose remaining work would add less than ``min_gain``
   accuracy (its predicted best), is stopped (``Stop``). Checked at every decision point.
2. *Migration* (every round): a server above ``h`` on CPU, memory or network moves out tasks
   until it is not: the candidates are its tasks with the lowest ``lowest_share`` (10%) of
   priority (at least one); among them, the one closest (Euclidean over CPU, memory, network)
   to the *ideal virtual task*, whose demand equals the server's excess over ``h`` (ours: moving
   it would bring the server exactly to the threshold). A task is a job's part on that server
   (its priority is the job's); it moves whole to the server closest to the ideal virtual
   host among those that stay at or below ``h`` with it (here without the liveness exemption,
   so a job that alone exceeds ``h`` is never moved around), not already used by the job. The
   job restarts (``Migrate``: restart overhead, no work lost). A job moved is not moved again
   for ``migration_cooldown_s``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from envs.sim.model import JobSpec, Pool
from envs.sim.policy import Action, ClusterView, JobStatus, Migrate, Preempt, Start, Stop
from heuristics.common import Victim, take_room, types_for
from heuristics.mlfs_priority import Hopeless, MlfsConfig, job_priorities, ranked

GPU, CPU, MEM, NET = range(4)
_OTHER = (CPU, MEM, NET)


def work_fraction(view: ClusterView, job: int) -> float:
    done, total = view.work(job)
    return done / total if total > 0.0 else 1.0


def net_gbps(spec: JobSpec) -> float:
    """Bandwidth the job's exchange needs when it spans servers (Gbit/s)."""
    if spec.comm_gb <= 0.0 or spec.curve is None or spec.duration <= 0.0:
        return 0.0
    return spec.comm_gb * 8.0 * spec.curve.iterations / spec.duration


def part_usage(spec: JobSpec, gpus: int, total: int, spread: bool, frac: float, cfg: MlfsConfig) -> np.ndarray:
    """CPU, memory and network (in server capacities; GPU entry 0) of a job's ``gpus`` of
    ``total`` GPUs on one server."""
    out = np.zeros(4)
    d = spec.demand
    if d is not None:
        out[CPU] = d.cpus(gpus, frac) / cfg.server_cpus
        out[MEM] = d.mem_gb(gpus, frac) / cfg.server_mem_gb
    if spread:
        out[NET] = net_gbps(spec) * gpus / total / cfg.server_net_gbps
    return out


@dataclass
class Accounting:
    """Per-server utilisation vectors, recomputed when time or the cluster's occupancy changes.

    ``util[s]``: (GPU, CPU, memory, network) of server ``s``; ``parts[s]``: (job, its usage
    there) for the jobs it hosts."""

    config: MlfsConfig
    util: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    parts: list[list[tuple[int, np.ndarray]]] = field(default_factory=list)
    _key: tuple[float, bytes, tuple[int, ...]] | None = None

    def refresh(self, view: ClusterView) -> None:
        key = (view.now, view.free_gpus().tobytes(), tuple(view.running))
        if key == self._key:
            return
        self._key = key
        servers = view.servers
        util = np.zeros((len(servers), 4))
        parts: list[list[tuple[int, np.ndarray]]] = [[] for _ in servers]
        for s in servers:
            util[s.server_id, GPU] = view.used(s.server_id) / s.num_gpus
        for job in sorted(view.running):
            _, _, base, flex = view.allocation(job)
            alloc = (*base, *flex)
            if not alloc:
                continue
            spec = view.job(job)
            frac = work_fraction(view, job)
            per_server: dict[int, int] = {}
            for sid, g in alloc:
                per_server[sid] = per_server.get(sid, 0) + g
            spread, workers = len(per_server) > 1, view.workers(job)
            for sid, g in per_server.items():
                use = part_usage(spec, g, workers, spread, frac, self.config)
                util[sid] += use
                parts[sid].append((job, use))
        self.util, self.parts = util, parts


def distance_to_host(post: np.ndarray, h: float) -> float:
    """Euclidean distance of a post-placement utilisation to the ideal virtual host (1, h, h, h)."""
    return math.sqrt((post[GPU] - 1.0) ** 2 + sum((post[r] - h) ** 2 for r in _OTHER))


def fits_below(post: np.ndarray, own: np.ndarray, h: float, exempt: bool) -> bool:
    """Whether a server stays at or below ``h`` on CPU, memory and network with the job's part
    (``own``); with ``exempt``, a resource the part alone exceeds only needs it to be alone."""
    for r in _OTHER:
        limit = max(h, own[r]) if exempt else h
        if post[r] > limit + 1e-12:
            return False
    return True


@dataclass
class MlfsPlacement:
    """The ideal-virtual-host placement (module docstring). Shares its :class:`Accounting`."""

    config: MlfsConfig
    accounting: Accounting

    def place(self, view: ClusterView, job: int) -> Start | None:
        spec = view.job(job)
        n = spec.num_gpus
        order = self.config.type_order
        types = [t for t in types_for(view, spec, Pool.TRAINING, n, order) if view.total_free(t, Pool.TRAINING) >= n]
        if not types:
            return None
        acc = self.accounting
        acc.refresh(view)
        frac = work_fraction(view, job)
        h = self.config.threshold
        best: tuple[float, int] | None = None
        for t in types:
            for sid in view.servers_by_free(t, Pool.TRAINING):
                free = view.free(sid)
                if free < n:
                    break
                own = part_usage(spec, n, n, False, frac, self.config)
                post = acc.util[sid] + own
                post[GPU] += n / view.servers[sid].num_gpus
                if fits_below(post, own, h, exempt=True):
                    d = distance_to_host(post, h)
                    if best is None or (d, sid) < best:
                        best = (d, sid)
            if best is not None and order == "fastest":
                break  # the fastest type with a server below the threshold: the ideal host among its servers
        if best is not None:
            return Start(job, ((best[1], n),))
        for t in types:
            alloc = self._spread(view, spec, t, frac)
            if alloc is not None:
                return Start(job, alloc)
        return None

    def _spread(
        self, view: ClusterView, spec: JobSpec, gpu_type: str, frac: float
    ) -> tuple[tuple[int, int], ...] | None:
        n, h, acc = spec.num_gpus, self.config.threshold, self.accounting
        left = n
        chosen: list[tuple[int, int]] = []
        candidates = list(view.servers_by_free(gpu_type, Pool.TRAINING))
        while left > 0:
            final: tuple[float, int] | None = None
            partial: tuple[int, float, int] | None = None
            for sid in candidates:
                free = view.free(sid)
                g = min(free, left)
                own = part_usage(spec, g, n, True, frac, self.config)
                post = acc.util[sid] + own
                post[GPU] += g / view.servers[sid].num_gpus
                if not fits_below(post, own, h, exempt=True):
                    continue
                d = distance_to_host(post, h)
                if free >= left:
                    if final is None or (d, sid) < final:
                        final = (d, sid)
                elif partial is None or (-free, d, sid) < partial:
                    partial = (-free, d, sid)
            if final is not None:
                chosen.append((final[1], left))
                return tuple(chosen)
            if partial is None:
                return None
            sid = partial[2]
            g = view.free(sid)
            chosen.append((sid, g))
            candidates.remove(sid)
            left -= g
        return None  # pragma: no cover - the loop returns


def overloaded(view: ClusterView, acc: Accounting, h: float) -> bool:
    """Jobs wait, or the mean over placeable training servers of their most-used resource > h."""
    if view.pending:
        return True
    ids = [s.server_id for s in view.servers if s.pool == Pool.TRAINING and view.placeable(s.server_id)]
    if not ids:
        return False
    acc.refresh(view)
    return float(np.mean(acc.util[ids].max(axis=1))) > h


@dataclass
class MlfsLoadControl:
    """Early stops and migrations (module docstring); the ``preemption`` component."""

    config: MlfsConfig
    accounting: Accounting
    placement: MlfsPlacement
    lost: Hopeless | None = None  # with ``config.hopeless``: the demotions
    _moved: dict[int, float] = field(default_factory=dict)

    def preempt(self, view: ClusterView) -> Iterator[Action]:
        cfg = self.config
        if cfg.early_stop and view.running and overloaded(view, self.accounting, cfg.threshold):
            yield from self._stops(view)
        if self.lost is not None and view.pending and view.running:
            yield from self._demotions(view, self.lost)
        if cfg.migration and view.round_tick and view.running:
            yield from self._migrations(view)

    def _demotions(self, view: ClusterView, lost: Hopeless) -> Iterator[Action]:
        """Running hopeless jobs yield their GPUs to pending jobs that can still meet their
        deadline: walking those in MLFS's order, one that the free GPUs of no type it allows
        hold takes those of running hopeless jobs on one such type (the most work left first;
        only jobs past their restart, so that each restart makes progress), if together they
        are enough; they are preempted gracefully (no work lost) and queue again. The GPUs of
        jobs still checkpointing count as free (they are on their way)."""
        cfg = self.config
        free = {t: view.total_free(t, p) for t, p in view.pool_types() if p == Pool.TRAINING}
        victims: dict[str, list[Victim]] = {}  # type -> (-work left, job, GPUs)
        for job in sorted(view.running):
            status, gpu_type, base, _ = view.allocation(job)
            if gpu_type is None or any(view.servers[s].pool != Pool.TRAINING for s, _ in base):
                continue
            if status == JobStatus.PREEMPTING:  # its GPUs free once it has checkpointed
                free[gpu_type] += view.workers(job)
            elif status == JobStatus.RUNNING and view.restarting_until(job) < view.now and lost(view, job):
                victims.setdefault(gpu_type, []).append((-view.remaining_work(job), job, view.workers(job)))
        if not victims:
            return
        for rows in victims.values():
            rows.sort()
        for job in ranked(view, [j for j in view.pending if not lost(view, j)], cfg):
            spec = view.job(job)
            need = spec.num_gpus
            types = types_for(view, spec, Pool.TRAINING, need, cfg.type_order)
            fit = next((t for t in types if free[t] >= need), None)
            if fit is not None:
                free[fit] -= need
                continue
            for t in types:
                jobs = take_room(victims.get(t, []), free, t, need)
                if jobs is not None:
                    yield from (Preempt(j, graceful=True) for j in jobs)
                    break

    def _stops(self, view: ClusterView) -> Iterator[Action]:
        for job in sorted(view.running):
            spec = view.job(job)
            if spec.required_accuracy is None or spec.curve is None or view.status_of(job) != JobStatus.RUNNING:
                continue
            acc = spec.curve.accuracy(work_fraction(view, job))
            if acc >= spec.required_accuracy or spec.curve.accuracy(1.0) - acc < self.config.min_gain:
                yield Stop(job)

    def _migrations(self, view: ClusterView) -> Iterator[Action]:
        cfg, acc, h = self.config, self.accounting, self.config.threshold
        acc.refresh(view)
        hot = [s.server_id for s in view.servers if acc.util[s.server_id][list(_OTHER)].max() > h + 1e-12]
        if not hot:
            return
        running = [j for j in sorted(view.running) if view.status_of(j) == JobStatus.RUNNING]
        prio = job_priorities(view, running, cfg)
        for sid in hot:
            tried: set[int] = set()
            while True:
                acc.refresh(view)
                excess = np.maximum(acc.util[sid] - h, 0.0)
                excess[GPU] = 0.0
                if not excess.any():
                    break
                here = [
                    (prio[j], j, use)
                    for j, use in acc.parts[sid]
                    if j in prio
                    and j not in tried
                    and view.now - self._moved.get(j, -math.inf) >= cfg.migration_cooldown_s
                ]
                if not here:
                    break
                here.sort(key=lambda x: (x[0], x[1]))
                lowest = here[: max(1, math.ceil(cfg.lowest_share * len(here)))]
                _, job, _ = min(lowest, key=lambda x: (float(np.linalg.norm(x[2][1:] - excess[1:])), x[0], x[1]))
                tried.add(job)
                move = self._destination(view, job, sid)
                if move is None:
                    continue
                self._moved[job] = view.now
                yield move

    def _destination(self, view: ClusterView, job: int, source: int) -> Migrate | None:
        """The job's part on ``source`` moved whole to the best server that stays at or below h."""
        st = view.state(job)
        spec = view.job(job)
        if st.flex or st.gpu_type is None:
            return None
        g = next(n for s, n in st.base if s == source)
        used = {s for s, _ in st.base}
        spread = len(used) > 1
        frac = work_fraction(view, job)
        own = part_usage(spec, g, st.workers, spread, frac, self.config)
        h = self.config.threshold
        best: tuple[float, int] | None = None
        for sid in view.servers_by_free(st.gpu_type, Pool.TRAINING):
            if view.free(sid) < g:
                break
            if sid in used:
                continue
            post = self.accounting.util[sid] + own
            post[GPU] += g / view.servers[sid].num_gpus
            if fits_below(post, own, h, exempt=False):
                d = distance_to_host(post, h)
                if best is None or (d, sid) < best:
                    best = (d, sid)
        if best is None:
            return None
        base = tuple((best[1] if s == source else s, n) for s, n in st.base)
        return Migrate(job, base)
