"""Servers, their free GPUs, who sits where, and the loan state of inference servers.

The cluster enforces capacity: a server never holds more GPUs than it has (``allocate`` raises
otherwise, which would be an engine bug: the engine validates decisions before applying them).
It also keeps an index of placeable servers by (GPU type, pool) and free-GPU count, so that
best-fit queries cost O(GPUs per server) instead of O(servers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from envs.sim.model import Pool, ServerSpec
from envs.sim.policy import PLACEABLE, ServerStatus

Key = tuple[str, Pool]


class Cluster:
    """Mutable state of all servers. Only the engine holds one; policies read a ClusterView."""

    def __init__(self, servers: Sequence[ServerSpec]) -> None:
        for i, s in enumerate(servers):
            if s.server_id != i:
                raise ValueError(f"server ids must be 0..n-1 in order; server {i} has id {s.server_id}")
        self.servers: tuple[ServerSpec, ...] = tuple(servers)
        self.free: list[int] = [s.num_gpus for s in servers]
        self.status: list[ServerStatus] = [
            ServerStatus.AVAILABLE if s.pool == Pool.TRAINING else ServerStatus.INFERENCE for s in servers
        ]
        self.hosted: list[dict[int, int]] = [{} for _ in servers]  # job -> GPUs it holds there
        # free GPUs per server, 0 where nothing may be placed (kept with ``free`` and ``status``)
        self.room: list[int] = [f if st in PLACEABLE else 0 for f, st in zip(self.free, self.status, strict=True)]
        self.deadline: list[float] = [math.nan] * len(servers)
        self.key: list[Key] = [(s.gpu_type.name, s.pool) for s in servers]
        self.version = 0  # bumped on every change; views cache derived arrays per version
        self.grown = 0  # bumped when GPUs are freed on a placeable server or a server becomes placeable
        size = max((s.num_gpus for s in servers), default=0)
        self._buckets: dict[Key, list[dict[int, None]]] = {}
        self._total: dict[Key, int] = {}
        for k in dict.fromkeys(self.key):
            self._buckets[k] = [{} for _ in range(size + 1)]
            self._total[k] = 0
        for i in range(len(servers)):
            if self.status[i] in PLACEABLE:
                self._index(i)
        self.pool_types: tuple[Key, ...] = tuple(self._buckets)

    # ------------------------------------------------------------------ index
    def _index(self, sid: int) -> None:
        k = self.key[sid]
        self._buckets[k][self.free[sid]][sid] = None
        self._total[k] += self.free[sid]

    def _unindex(self, sid: int) -> None:
        k = self.key[sid]
        del self._buckets[k][self.free[sid]][sid]
        self._total[k] -= self.free[sid]

    def placeable(self, sid: int) -> bool:
        return self.status[sid] in PLACEABLE

    def total_free(self, key: Key) -> int:
        return self._total.get(key, 0)

    def best_fit(self, key: Key, need: int) -> int | None:
        """The placeable server of ``key`` with the fewest free GPUs that still fit ``need``
        (lowest id among equals), or None."""
        buckets = self._buckets.get(key)
        if buckets is None or need <= 0:
            return None
        for f in range(need, len(buckets)):
            b = buckets[f]
            if b:
                return min(b)
        return None

    def max_free(self, key: Key) -> int:
        """The most free GPUs on one placeable server of ``key`` (0 if none)."""
        buckets = self._buckets.get(key)
        if buckets is None:
            return 0
        for f in range(len(buckets) - 1, 0, -1):
            if buckets[f]:
                return f
        return 0

    def by_free(self, key: Key) -> list[int]:
        """Placeable servers of ``key`` with free GPUs, most free first, then lowest id."""
        buckets = self._buckets.get(key)
        if buckets is None:
            return []
        out: list[int] = []
        for f in range(len(buckets) - 1, 0, -1):
            if buckets[f]:
                out.extend(sorted(buckets[f]))
        return out

    # ------------------------------------------------------------------ changes
    def allocate(self, sid: int, job: int, gpus: int) -> None:
        free = self.free[sid]
        if gpus > free:
            raise RuntimeError(f"server {sid} has {free} free GPUs, cannot hold {gpus} more")
        self.free[sid] = free - gpus
        h = self.hosted[sid]
        h[job] = h.get(job, 0) + gpus
        if self.status[sid] in PLACEABLE:  # _unindex then _index, in one (the path of every start)
            k = self.key[sid]
            buckets = self._buckets[k]
            del buckets[free][sid]
            buckets[free - gpus][sid] = None
            self._total[k] -= gpus
            self.room[sid] = free - gpus
        self.version += 1

    def release(self, sid: int, job: int, gpus: int) -> None:
        h = self.hosted[sid]
        left = h[job] - gpus
        if left < 0:
            raise RuntimeError(f"job {job} holds {h[job]} GPUs on server {sid}, cannot release {gpus}")
        if left:
            h[job] = left
        else:
            del h[job]
        free = self.free[sid]
        self.free[sid] = free + gpus
        if self.status[sid] in PLACEABLE:  # _unindex then _index, in one
            k = self.key[sid]
            buckets = self._buckets[k]
            del buckets[free][sid]
            buckets[free + gpus][sid] = None
            self._total[k] += gpus
            self.room[sid] = free + gpus
            self.grown += 1
        self.version += 1

    def set_status(self, sid: int, status: ServerStatus, deadline: float = math.nan) -> None:
        was = self.status[sid] in PLACEABLE
        now = status in PLACEABLE
        if was and not now:
            self._unindex(sid)
        self.status[sid] = status
        self.deadline[sid] = deadline
        if now and not was:
            self._index(sid)
            self.grown += 1
        self.room[sid] = self.free[sid] if now else 0
        self.version += 1

    def servers_with(self, status: ServerStatus) -> list[int]:
        return [i for i, s in enumerate(self.status) if s == status]

    def placeable_free(self) -> np.ndarray:
        """Free GPUs per server, 0 where nothing may be placed."""
        return np.array(self.room, dtype=np.int64)
