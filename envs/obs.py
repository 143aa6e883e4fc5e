"""Observation encoding: fixed-size, normalised float32 vectors (layout version ``OBS_VERSION``).

Every feature lies in [-1, 1] (log-scaled and clipped). The layouts are documented feature by
feature in the env docstrings; ``JOB_FEATURES``, ``SERVER_FEATURES`` and ``CLUSTER_FEATURES``
name them in order.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from envs.core import Core
from envs.sim.model import JobClass, Pool
from envs.sim.policy import ServerStatus
from envs.sim.throughput import packed_servers

OBS_VERSION = 3

JOB_FEATURES = (
    "present",  # 1 if the slot holds a job
    "gpus",  # log2(1 + requested GPUs) / 6
    "base_gpus",  # log2(1 + min GPUs) / 6
    "elastic_range",  # log2(1 + max - min GPUs) / 6
    "any_type",  # 1 if the job may run on any GPU type (so on loaned inference servers)
    "remaining",  # log1p(remaining isolated run time in hours) / 5
    "waiting",  # log1p(hours waited so far) / 5
    "te",  # 1 for a trial-and-error job
    "has_deadline",  # 1 if the job has a deadline
    "slack",  # tanh((deadline - now - remaining) / 24 h); 0 without a deadline
    "preemptions",  # min(preemptions, 5) / 5
    "fits",  # 1 if it can start now (the action mask)
    "inference_speed",  # its speed on the inference GPU type / on the training type (0 if pinned)
    "attained",  # log1p(GPU-hours held so far) / 5
    "remaining_base",  # log1p(remaining run time at its base (min) GPUs, in hours) / 5
    "ahead_gpus",  # base GPUs of the visible jobs with less remaining_base / GPUs open to training
)
CLUSTER_FEATURES = (
    "training_free",  # free / up GPUs of the training pool
    "loaned_free",  # free GPUs on loan / all inference GPUs
    "loaned",  # servers on loan / inference servers
    "reclaiming",  # servers being reclaimed / inference servers
    "inference_load",  # inference demand (share of its GPUs)
    "day_sin",  # time of day
    "day_cos",
    "queue",  # log1p(jobs waiting) / 5
    "hidden",  # log1p(jobs waiting beyond the visible slots) / 5
    "running",  # log1p(jobs holding GPUs) / 5
    "to_arrive",  # share of the episode's jobs not yet submitted
    "largest_free",  # largest free block on one training server / its size
)
SERVER_FEATURES = (
    "placeable",  # 1 if new workers may go there (up; training, or on loan and not reclaimed)
    "free",  # free GPUs / its GPUs
    "inference",  # 1 for an inference server
    "reclaiming",  # 1 if it is being reclaimed
    "type_speed",  # training speed of its GPU type / 2 (V100 = 0.5)
    "speed_est",  # estimated machine speed factor - 1, learned from observed job speeds (SpeedEstimator)
    "speed_std",  # the estimate's standard deviation (in log-speed)
    "jobs",  # log1p(jobs hosted) / 3
    "allowed",  # 1 if the current job may use its GPU type
    "chosen",  # 1 if the current job already has workers there
    "valid",  # 1 if a worker of the current job may go there now (the action mask)
    "fits_left",  # 1 if its free GPUs hold all the workers still to place
    "spare",  # (free GPUs - workers still to place) / its GPUs, clipped to [-1, 1]
)


def _log(x: float, scale: float) -> float:
    return min(1.0, math.log1p(max(0.0, x)) / scale)


class SpeedEstimator:
    """Each machine's speed factor, learned from the speeds its jobs are observed to run at (ours,
    in the spirit of the dual-agent paper's random-walk Gaussian process over machine similarity).

    Every run of a job gives one observation ``y = log(observed rate / nominal rate)`` (nominal:
    the throughput model's rate for its GPUs, type and spread, times the co-location slowdown of
    the scenario's known contention model, so ``y`` holds the machine factor and the run's
    fluctuation), credited to each server it runs on (the slowest one sets a gang's pace, so the
    others' estimates are biased low: ours, accepted for one-server jobs being the common case). Model:
    ``log factor = group effect + machine effect``, group effects ~ N(0, 0.15^2) shared by the
    machines of one rack / SKU group (the similarity), machine effects ~ N(0, 0.05^2),
    observation noise ~ N(0, 0.1^2). The group effect's posterior pools all its machines'
    observations; each machine's posterior then adds its own. Conjugate normal updates, exact
    for this model given the variances; cheap enough for every placement step.
    """

    GROUP_VAR, MACHINE_VAR, NOISE_VAR = 0.15**2, 0.05**2, 0.1**2

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        servers = engine.cluster.servers
        self.group = np.array([s.group for s in servers])
        self.sum = np.zeros(len(servers))
        self.count = np.zeros(len(servers))
        self._seen: set[tuple[int, int]] = set()  # (job, run) already counted

    def observe(self) -> None:
        e = self.engine
        for idx in e.running:
            j = e.jobs[idx]
            run = (idx, j.preemptions + j.scales + j.migrations)
            if run in self._seen or j.rate <= 0.0 or j.gpu_type is None:
                continue
            self._seen.add(run)
            nominal = e.throughput.rate(j.spec, j.workers, j.nservers, j.gpu_type) * j.mults[j.phase] * j.crowd
            y = math.log(j.rate / nominal)
            for sid in {s for s, _ in (*j.base, *j.flex)}:
                self.sum[sid] += y
                self.count[sid] += 1

    def estimate(self) -> tuple[np.ndarray, np.ndarray]:
        """(posterior mean, posterior std) of every machine's log speed factor."""
        self.observe()
        per_obs = self.MACHINE_VAR + self.NOISE_VAR  # an observation seen from the group's side
        groups = np.unique(self.group)
        g_mean = np.zeros(len(self.group))
        g_var = np.zeros(len(self.group))
        for g in groups:
            m = self.group == g
            prec = 1.0 / self.GROUP_VAR + self.count[m].sum() / per_obs
            g_mean[m] = self.sum[m].sum() / per_obs / prec
            g_var[m] = 1.0 / prec
        prior_var = g_var + self.MACHINE_VAR
        prec = 1.0 / prior_var + self.count / self.NOISE_VAR
        mean = (g_mean / prior_var + self.sum / self.NOISE_VAR) / prec
        return mean, np.sqrt(1.0 / prec)


class Encoder:
    """Builds the observations of one episode; ``reset`` after every ``Core.reset``."""

    def __init__(self, core: Core, slots: int) -> None:
        self.core = core
        self.slots = slots
        self.episode: object = None  # the engine this encoder was last reset for

    def reset(self) -> None:
        e = self.core.engine
        assert e is not None
        self.episode = e
        specs = e.specs
        training = next((s.gpu_type for s in e.cluster.servers if s.pool == Pool.TRAINING), None)
        inference = next((s.gpu_type for s in e.cluster.servers if s.pool == Pool.INFERENCE), None)
        tp = e.throughput
        static = np.zeros((len(specs), len(JOB_FEATURES)), dtype=np.float32)
        for s in specs:
            row = static[s.job_id]
            row[0] = 1.0
            row[1] = math.log2(1 + s.num_gpus) / 6
            row[2] = math.log2(1 + s.min_gpus) / 6
            row[3] = math.log2(1 + s.max_gpus - s.min_gpus) / 6
            row[4] = 1.0 if s.gpu_types is None else 0.0
            row[7] = 1.0 if s.job_class == JobClass.TE else 0.0
            row[8] = 0.0 if s.deadline is None else 1.0
            if s.gpu_types is None and inference is not None and training is not None:
                row[12] = min(1.0, tp.rate(s, s.min_gpus, 1, inference) / tp.rate(s, s.min_gpus, 1, training))
        # remaining time at the base demand = remaining work / rate(min GPUs, packed)
        self._deadline = np.array([s.deadline if s.deadline is not None else np.nan for s in specs])
        self._min_gpus = np.array([s.min_gpus for s in specs], dtype=np.float64)
        self._base_slow = [
            1.0 / tp.rate(s, s.min_gpus, packed_servers(s.min_gpus), training) if training is not None else 1.0
            for s in specs
        ]
        self._base_slow_arr = np.array(self._base_slow)
        self._static = static
        self._inf_servers = sum(1 for s in e.cluster.servers if s.pool == Pool.INFERENCE)
        self._training_keys = [k for k in e.cluster.pool_types if k[1] == Pool.TRAINING]
        self.speeds = SpeedEstimator(e)
        self._size = max(s.num_gpus for s in e.cluster.servers)
        self._server_gpus = np.array([s.num_gpus for s in e.cluster.servers], dtype=np.float32)

    # ------------------------------------------------------------------ ordering
    def ordering(self, visible: list[int], fits: list[bool]) -> np.ndarray:
        k = self.slots
        nf = len(JOB_FEATURES)
        out = np.zeros(k * nf + len(CLUSTER_FEATURES), dtype=np.float32)
        n = len(visible)
        if n:
            e = self.core.engine
            assert e is not None
            now = e.now
            block = out[: n * nf].reshape(n, nf)
            block[:] = self._static[visible]
            js = [e.jobs[job] for job in visible]  # visible jobs are pending: work and queue time settled
            remaining = np.array([j.work - j.work_done for j in js])
            waited = np.array([j.queued_time + now - j.queued_since for j in js])
            left_base = remaining * self._base_slow_arr[visible]
            block[:, 5] = np.minimum(1.0, np.log1p(remaining / 3600.0) / 5.0)
            block[:, 6] = np.minimum(1.0, np.log1p(np.maximum(waited, 0.0) / 3600.0) / 5.0)
            deadlines = self._deadline[visible]
            has = ~np.isnan(deadlines)
            if has.any():
                block[has, 9] = np.tanh((deadlines[has] - now - remaining[has]) / 86400.0)
            block[:, 10] = np.minimum([j.preemptions for j in js], 5) / 5.0
            block[:, 11] = fits
            block[:, 13] = np.minimum(1.0, np.log1p(np.array([j.attained for j in js]) / 3600.0) / 5.0)
            block[:, 14] = np.minimum(1.0, np.log1p(left_base / 3600.0) / 5.0)
            # shortest-remaining-first: the base GPUs the visible jobs ahead of each would take first
            order = np.argsort(left_base, kind="stable")
            ahead = np.cumsum(self._min_gpus[visible][order]) - self._min_gpus[visible][order]
            block[order, 15] = np.minimum(1.0, ahead / max(1, e.cap_training + e.cap_loaned))
        out[k * nf :] = self.cluster(hidden=max(0, len(self.core.view.pending) - n))
        return out

    def cluster(self, hidden: int) -> np.ndarray:
        e = self.core.engine
        assert e is not None
        cl = e.cluster
        c = np.zeros(len(CLUSTER_FEATURES), dtype=np.float32)
        c[0] = (e.cap_training - e.busy_training) / e.cap_training if e.cap_training else 0.0
        if e.cap_inference:
            c[1] = (e.cap_loaned - e.busy_loaned) / e.cap_inference
            c[2] = e.n_loaned / self._inf_servers
            c[3] = cl.status.count(ServerStatus.RECLAIMING) / self._inf_servers
            c[4] = e.inference_gpus / e.cap_inference
        c[5], c[6] = self.core.time_of_day()
        c[7] = _log(len(e.pending), 5.0)
        c[8] = _log(hidden, 5.0)
        c[9] = _log(len(e.running), 5.0)
        c[10] = 1.0 - e._arrived / len(e.jobs)
        c[11] = max((cl.max_free(k) / self._size for k in self._training_keys), default=0.0)
        return c

    # ------------------------------------------------------------------ placement
    def placement(self, job: int, left: int, chosen: dict[int, int], valid: np.ndarray) -> np.ndarray:
        """Per-server features for placing the next worker of ``job`` (``left`` still to place,
        ``chosen``: server -> workers already given), then the job's row, then the cluster."""
        e = self.core.engine
        assert e is not None
        cl = e.cluster
        spec = e.specs[job]
        ns = len(cl.servers)
        g = len(SERVER_FEATURES)
        out = np.zeros(ns * g + len(JOB_FEATURES) + 1 + len(CLUSTER_FEATURES), dtype=np.float32)
        srv = out[: ns * g].reshape(ns, g)
        for i, s in enumerate(cl.servers):
            st = cl.status[i]
            srv[i, 0] = 1.0 if st in (ServerStatus.AVAILABLE, ServerStatus.LOANED) else 0.0
            srv[i, 1] = cl.free[i] / s.num_gpus
            srv[i, 2] = 1.0 if s.pool == Pool.INFERENCE else 0.0
            srv[i, 3] = 1.0 if st == ServerStatus.RECLAIMING else 0.0
            srv[i, 4] = min(1.0, s.gpu_type.speed / 2.0)
            srv[i, 7] = _log(len(cl.hosted[i]), 3.0)
            srv[i, 8] = 1.0 if spec.allows(s.gpu_type) else 0.0
            srv[i, 9] = 1.0 if i in chosen else 0.0
        mean, std = self.speeds.estimate()
        srv[:, 5] = np.clip(np.expm1(mean), -1.0, 1.0)
        srv[:, 6] = np.clip(std, 0.0, 1.0)
        srv[:, 10] = valid
        spare = (np.asarray(cl.free, dtype=np.float32) - left) / self._server_gpus
        srv[:, 11] = spare >= 0.0
        srv[:, 12] = np.clip(spare, -1.0, 1.0)
        row = self._static[job].copy()
        j = e.jobs[job]
        remaining = j.work - j.work_done
        row[5] = _log(remaining / 3600.0, 5.0)
        row[6] = _log(self.core.waiting(job) / 3600.0, 5.0)
        row[11] = 1.0
        row[14] = _log(remaining * self._base_slow[job] / 3600.0, 5.0)
        off = ns * g
        out[off : off + len(JOB_FEATURES)] = row
        out[off + len(JOB_FEATURES)] = math.log2(1 + left) / 6
        out[off + len(JOB_FEATURES) + 1 :] = self.cluster(hidden=0)
        return out
