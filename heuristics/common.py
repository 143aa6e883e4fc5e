"""Pieces several policies share: consolidated placement and queue bookkeeping."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from envs.sim.model import JobSpec, Pool
from envs.sim.policy import Alloc, ClusterView, JobStatus, Start

TRAINING_ONLY: tuple[Pool, ...] = (Pool.TRAINING,)


def pack(
    view: ClusterView,
    job: JobSpec,
    gpus: int,
    pools: Sequence[Pool] = TRAINING_ONLY,
    exclude: frozenset[int] = frozenset(),
    gpu_type: str | None = None,
) -> Alloc | None:
    """Place ``gpus`` workers of ``job`` on as few servers as possible.

    Tries the pools in the given order and, within a pool, the GPU types the job allows in the
    cluster's order (only ``gpu_type`` if given). One server if any fits (best fit: the fewest
    free GPUs that suffice, lowest id among equals); otherwise the servers with the most free
    GPUs, the last one chosen by best fit for the remainder. ``exclude``: servers not to use.
    ``None`` if it does not fit.
    """
    for pool in pools:
        for tname, p in view.pool_types():
            if p != pool or not job.allows(view.gpu_type(tname)) or view.total_free(tname, pool) < gpus:
                continue
            if gpu_type is not None and tname != gpu_type:
                continue
            if not exclude:
                sid = view.best_fit(tname, pool, gpus)
                if sid is not None:
                    return ((sid, gpus),)
            alloc = _spread([s for s in view.servers_by_free(tname, pool) if s not in exclude], view, gpus)
            if alloc is not None:
                return alloc
    return None


def _spread(servers: list[int], view: ClusterView, gpus: int) -> Alloc | None:
    """``servers`` sorted by free GPUs, most first."""
    frees = [view.free(s) for s in servers]
    out: list[tuple[int, int]] = []
    left = gpus
    i = 0
    while left > 0 and i < len(servers):
        if frees[i] >= left:
            # the tightest of the remaining servers that holds the remainder
            j = i
            while j + 1 < len(servers) and frees[j + 1] >= left:
                j += 1
            out.append((servers[j], left))
            return tuple(out)
        out.append((servers[i], frees[i]))
        left -= frees[i]
        i += 1
    return None


@dataclass
class PackPlacement:
    """Start a pending job at its requested size, consolidated (``pack``), in ``pools``.

    An elastic job starts at its requested ``num_gpus`` as base workers: no elasticity."""

    pools: tuple[Pool, ...] = TRAINING_ONLY

    def place(self, view: ClusterView, job: int) -> Start | None:
        spec = view.job(job)
        alloc = pack(view, spec, spec.num_gpus, self.pools)
        return None if alloc is None else Start(job, alloc)


class SortedQueue:
    """The pending jobs a policy tracks, kept sorted by a key fixed when a job (re-)enters.

    ``sync`` takes in the jobs that entered the queue since the previous sync; ``walk`` yields
    the pending jobs in key order and drops the ones that left the queue (started) on the way.
    """

    def __init__(self, key: Callable[[ClusterView, int], tuple[float, ...]]) -> None:
        self._key = key
        self._items: list[tuple[tuple[float, ...], int]] = []
        self._cursor = 0

    def sync(self, view: ClusterView) -> None:
        jobs, self._cursor = view.entered_since(self._cursor)
        self.add(view, jobs)

    def rebuild(self, view: ClusterView) -> None:
        """Forget everything and take in every pending job (keys recomputed now)."""
        self._items = []
        self._cursor = view.entered_since(0)[1]
        self.add(view, view.pending)

    def add(self, view: ClusterView, jobs: Iterable[int]) -> None:
        for job in tuple(jobs):
            bisect.insort(self._items, (self._key(view, job), job))

    def walk(self, view: ClusterView) -> Iterator[int]:
        items = self._items
        i = 0
        while i < len(items):
            job = items[i][1]
            if view.status_of(job) != JobStatus.PENDING:
                del items[i]
                continue
            yield job
            if i < len(items) and items[i][1] == job and view.status_of(job) != JobStatus.PENDING:
                del items[i]
            else:
                i += 1

    def __len__(self) -> int:
        return len(self._items)


def free_gpus(view: ClusterView, pools: Sequence[Pool]) -> int:
    """Free GPUs on placeable servers of the given pools, all types."""
    return sum(view.total_free(t, p) for t, p in view.pool_types() if p in pools)
