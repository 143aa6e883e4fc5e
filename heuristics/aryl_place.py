"""Aryl's placement (section 5.3): best fit over servers, with pool preferences.

A job's gang of ``need`` GPUs (all of one GPU type, on one pool: ours) is packed by
:func:`best_fit`: if one server holds it, the server whose free GPUs fit it most tightly (a
non-empty server before an empty one, lowest id among equals); otherwise whole empty servers for
each full server's worth and the tightest fit for the remainder; if the free GPUs are too
fragmented for that, the servers with the most free GPUs, the last one chosen by best fit for
the remainder (fewest servers). The same function runs on the live view (phase 1 starts) and on
the virtual free maps (:class:`FreeMap`) on which the room component and phase 2 plan, so they
decide alike. Phase 2 places the flexible workers of all jobs in decreasing order of demand (best
fit decreasing); phase 1 places jobs in its priority order (see ``heuristics/aryl.py``).

Pools (Aryl section 5.3): an inelastic job tries training servers first, then loaned inference
servers (if it accepts their GPU type); an elastic job the other way round, so that its workers
sit where a reclaim can scale them in. With ``group_flex`` an elastic job's flexible workers never
share a server with its base workers, so the servers holding only flexible workers can go back
without a preemption.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from envs.sim.model import JobSpec, Pool
from envs.sim.policy import Alloc, ClusterView, Start

Key = tuple[str, Pool]


def best_fit(ids: np.ndarray, free: np.ndarray, cap: np.ndarray, need: int) -> Alloc | None:
    """Pack ``need`` GPUs on the servers ``ids`` (ascending) with ``free`` GPUs out of ``cap``.

    Returns ``((server, gpus), ...)`` or ``None`` if the free GPUs do not add up to ``need``.
    """
    if need <= 0 or int(free.sum()) < need:
        return None
    fits = np.flatnonzero(free >= need)
    if fits.size:
        i = fits[np.argmin(free[fits])]
        return ((int(ids[i]), need),)
    size = int(cap.max())
    full, rest = divmod(need, size)
    empty = np.flatnonzero(free == size)
    if empty.size >= full:
        out = [(int(ids[i]), size) for i in empty[:full]]
        if rest == 0:
            return tuple(out)
        left = free.copy()
        left[empty[:full]] = 0
        fits = np.flatnonzero(left >= rest)
        if fits.size:
            i = fits[np.argmin(left[fits])]
            return (*out, (int(ids[i]), rest))
    return _spread(ids, free, need)


def _spread(ids: np.ndarray, free: np.ndarray, need: int) -> Alloc:
    """Most free first (lowest id among equals); the last server is the tightest that holds the
    remainder. The caller checked that the free GPUs add up to ``need``."""
    order = np.lexsort((ids, -free))
    out: list[tuple[int, int]] = []
    left = need
    for pos, i in enumerate(order):
        f = int(free[i])
        if f >= left:
            tail = order[pos:]
            tight = tail[free[tail] >= left]
            j = tight[np.flatnonzero(free[tight] == free[tight].min())[0]]
            out.append((int(ids[j]), left))
            return tuple(out)
        out.append((int(ids[i]), f))
        left -= f
    raise AssertionError("best_fit checked the total")


@dataclass(frozen=True)
class ServerIndex:
    """The static server layout, per (GPU type, pool): ids (ascending) and GPUs per server."""

    ids: dict[Key, np.ndarray]
    cap: dict[Key, np.ndarray]
    key_of: tuple[Key, ...]

    @classmethod
    def of(cls, view: ClusterView) -> ServerIndex:
        ids: dict[Key, list[int]] = {}
        for s in view.servers:
            ids.setdefault((s.gpu_type.name, s.pool), []).append(s.server_id)
        arr = {k: np.array(v, dtype=np.int64) for k, v in ids.items()}
        caps = {k: np.array([view.servers[i].num_gpus for i in v], dtype=np.int64) for k, v in ids.items()}
        key_of = tuple((s.gpu_type.name, s.pool) for s in view.servers)
        return cls(arr, caps, key_of)


def pool_order(view: ClusterView, spec: JobSpec, loaned_first: bool, gpu_type: str | None = None) -> list[Key]:
    """The (type, pool) pairs ``spec`` may use, in order of preference: loaned inference servers
    first if ``loaned_first``, else training servers first; within a pool the cluster's order.
    ``gpu_type`` restricts to one type (flexible workers follow their base's type)."""
    keys = [
        (t, p) for t, p in view.pool_types() if (gpu_type is None or t == gpu_type) and spec.allows(view.gpu_type(t))
    ]
    first = Pool.INFERENCE if loaned_first else Pool.TRAINING
    return [k for k in keys if k[1] == first] + [k for k in keys if k[1] != first]


class FreeMap:
    """Virtual free GPUs per server (phase 2 plans on it before any action is taken), with the
    total per (type, pool) kept up to date."""

    def __init__(self, index: ServerIndex, free: np.ndarray) -> None:
        self.index = index
        self.free = free  # per server id; 0 where nothing may be placed
        self._total = {k: int(free[ids].sum()) for k, ids in index.ids.items()}

    def total(self, key: Key) -> int:
        return self._total.get(key, 0)

    def type_total(self, gpu_type: str) -> int:
        """Free GPUs of one type over its pools."""
        return sum(n for (t, _), n in self._total.items() if t == gpu_type)

    def fit(self, key: Key, need: int, exclude: Iterable[int] = ()) -> Alloc | None:
        ids = self.index.ids[key]
        free = self.free[ids]
        ex = [i for i in exclude if self.index.key_of[i] == key]
        if ex:
            free[np.searchsorted(ids, ex)] = 0
        return best_fit(ids, free, self.index.cap[key], need)

    def take(self, alloc: Alloc) -> None:
        for s, n in alloc:
            self.free[s] -= n
            self._total[self.index.key_of[s]] -= n
            assert self.free[s] >= 0, "virtual placement over capacity"

    def give(self, alloc: Alloc) -> None:
        for s, n in alloc:
            self.free[s] += n
            self._total[self.index.key_of[s]] += n


def base_size(spec: JobSpec, elastic: bool) -> int:
    """Phase 1's demand: an elastic job's base (``min_gpus``) when elasticity is on, else the
    requested ``num_gpus``."""
    return spec.min_gpus if elastic and spec.elastic else spec.num_gpus


@dataclass
class ArylPlacement:
    """Placement component (``envs.sim.policy.Placement``): start a pending job at its base
    demand by best fit, on the first (type, pool) of its preference order that holds it.
    Caches the server layout and each job's preferences: one instance per run.

    :param elastic: start elastic jobs at ``min_gpus`` (Aryl) or at ``num_gpus`` (Basic).
    :param loaned_first: elastic jobs prefer loaned inference servers (Aryl; off in the
        placement ablation ``aryl-nogroup``).
    """

    elastic: bool = True
    loaned_first: bool = True
    _index: ServerIndex | None = field(default=None, init=False, repr=False)
    _keys: dict[tuple[int, str | None], list[Key]] = field(default_factory=dict, init=False, repr=False)

    def index(self, view: ClusterView) -> ServerIndex:
        if self._index is None:
            self._index = ServerIndex.of(view)
        return self._index

    def keys(self, view: ClusterView, spec: JobSpec, gpu_type: str | None = None) -> list[Key]:
        """The (type, pool) pairs the job may use, most preferred first (cached per job)."""
        k = (spec.job_id, gpu_type)
        keys = self._keys.get(k)
        if keys is None:
            keys = pool_order(view, spec, self.loaned_first and self.elastic and spec.elastic, gpu_type)
            self._keys[k] = keys
        return keys

    def demand(self, spec: JobSpec) -> int:
        return base_size(spec, self.elastic)

    def place(self, view: ClusterView, job: int) -> Start | None:
        spec = view.job(job)
        need = self.demand(spec)
        index = self.index(view)
        for t, p in self.keys(view, spec):
            if view.total_free(t, p) < need:
                continue
            sid = view.best_fit(t, p, need)
            if sid is not None:
                return Start(job, ((sid, need),))
            ids = index.ids[t, p]
            alloc = best_fit(ids, view.free_gpus()[ids], index.cap[t, p], need)
            if alloc is not None:
                return Start(job, alloc)
        return None


def plan(free: FreeMap, keys: Sequence[Key], need: int, exclude: Iterable[int] = ()) -> Alloc | None:
    """Best fit on the first of ``keys`` that holds ``need`` GPUs of the virtual map."""
    ex = tuple(exclude)
    for key in keys:
        if free.total(key) < need:
            continue
        alloc = free.fit(key, need, ex)
        if alloc is not None:
            return alloc
    return None
