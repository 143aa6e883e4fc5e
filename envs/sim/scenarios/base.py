"""The scenario dataclasses, the registry, and ``build`` / ``simulate``."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from envs.sim.config import ConfigError, apply_overrides
from envs.sim.engine import Engine, SimConfig, SimResult
from envs.sim.inference import DemandCurve, InferenceConfig
from envs.sim.model import GPU_TYPES, JobSpec, Pool, ServerSpec
from envs.sim.policy import Scheduler
from envs.sim.throughput import ThroughputModel
from envs.sim.workload import (
    AttributeSampler,
    SyntheticWorkload,
    TraceError,
    build_jobs,
    generate,
    load_trace,
)

DATA = Path(__file__).resolve().parent.parent / "data"
ITP_TRACE = str(DATA / "traces" / "itp_cluster04_2000.csv")


@dataclass(frozen=True)
class ClusterConfig:
    """:param training_servers: servers of the training cluster.
    :param training_gpu: their GPU type (a name from ``model.GPU_TYPES``).
    :param inference_servers: servers of the inference cluster (0 = no loaning at all).
    :param inference_gpu: their GPU type.
    :param gpus_per_server: GPUs in every server.
    :param training_mix: a heterogeneous training pool instead, as ``"TYPE:COUNT,TYPE:COUNT"``
        (e.g. ``"V100-32GB:6,A100-40GB:4"``); empty = ``training_servers`` of ``training_gpu``.
    :param speed_groups: machines fall into this many racks / SKU groups whose speed differs by
        a latent factor (0 = every machine at nominal speed). Each group's factor is log-normal
        with sigma ``group_sigma``; each machine's adds its own, sigma ``server_sigma``.
        Servers are assigned to groups round-robin; draws come from the scenario's seed."""

    training_servers: int = 16
    training_gpu: str = "V100-32GB"
    inference_servers: int = 24
    inference_gpu: str = "T4-16GB"
    gpus_per_server: int = 8
    training_mix: str = ""
    speed_groups: int = 0
    group_sigma: float = 0.15
    server_sigma: float = 0.05

    def training_types(self) -> list[tuple[str, int]]:
        """(GPU type, servers) of the training pool."""
        if not self.training_mix:
            return [(self.training_gpu, self.training_servers)]
        out = []
        for part in self.training_mix.split(","):
            name, _, count = part.strip().rpartition(":")
            if not name or not count.isdigit():
                raise ConfigError(f"cluster.training_mix expects TYPE:COUNT,..., got '{self.training_mix}'.")
            out.append((name, int(count)))
        return out


@dataclass(frozen=True)
class WorkloadConfig:
    """:param trace: a CSV in our schema to replay; empty = the synthetic generator.
    :param synthetic: the synthetic generator's distributions (``num_jobs`` is the episode size).
    :param load: if > 0, the synthetic arrival rate is set so that the offered GPU-hours per
        hour equal ``load`` x the training pool's GPUs (``arrival_rate_per_hour`` is ignored).
    :param attributes: samplers for what the trace lacks.
    :param first_job: the episode's window starts at this job of the trace...
    :param num_jobs: ...and holds this many (0 = all); submit times are rebased to its first job.
    """

    trace: str = ""
    synthetic: SyntheticWorkload = field(default_factory=SyntheticWorkload)
    load: float = 0.0
    attributes: AttributeSampler = field(default_factory=AttributeSampler)
    first_job: int = 0
    num_jobs: int = 0


@dataclass(frozen=True)
class Scenario:
    name: str
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    version: int = 1

    def make_jobs(self, jobs: list[JobSpec], rng: np.random.Generator) -> list[JobSpec]:
        """Scenario-specific job attributes (learning curves, batch-size schedules, ...): a
        subclass adds them here, drawing from ``rng`` (its own stream). The default adds none."""
        return jobs


@dataclass
class Built:
    """A scenario made concrete for one seed."""

    scenario: Scenario
    seed: int
    servers: list[ServerSpec]
    jobs: list[JobSpec]
    demand: DemandCurve | None
    failure_rng: np.random.Generator
    policy_rng: np.random.Generator


_SCENARIOS: dict[str, Callable[[], Scenario]] = {}


def register(name: str) -> Callable[[Callable[[], Scenario]], Callable[[], Scenario]]:
    def deco(fn: Callable[[], Scenario]) -> Callable[[], Scenario]:
        if name in _SCENARIOS:
            raise ValueError(f"scenario '{name}' is registered twice")
        _SCENARIOS[name] = fn
        return fn

    return deco


def names() -> list[str]:
    return sorted(_SCENARIOS)


def get(name: str, overrides: Mapping[str, str] | None = None) -> Scenario:
    """The named scenario with ``--set`` overrides applied."""
    if name not in _SCENARIOS:
        raise ConfigError(f"unknown scenario '{name}'; valid scenarios: {', '.join(names())}.")
    s = _SCENARIOS[name]()
    return apply_overrides(s, overrides or {}) if overrides else s


def servers_of(c: ClusterConfig, rng: np.random.Generator | None = None) -> list[ServerSpec]:
    """The servers, training pool first. Machine speed factors need ``rng`` (else nominal)."""
    mix = c.training_types()
    for name in [t for t, _ in mix] + [c.inference_gpu]:
        if name not in GPU_TYPES:
            raise ConfigError(f"unknown GPU type '{name}'; known types: {', '.join(GPU_TYPES)}.")
    if sum(n for _, n in mix) < 1 or c.inference_servers < 0 or c.gpus_per_server < 1:
        raise ConfigError("the cluster needs at least one training server and one GPU per server.")
    pools = [(GPU_TYPES[t], Pool.TRAINING) for t, n in mix for _ in range(n)]
    pools += [(GPU_TYPES[c.inference_gpu], Pool.INFERENCE)] * c.inference_servers
    speeds = [1.0] * len(pools)
    groups = [0] * len(pools)
    if c.speed_groups > 0 and rng is not None:
        group_factor = np.exp(rng.normal(0.0, c.group_sigma, c.speed_groups))
        own = np.exp(rng.normal(0.0, c.server_sigma, len(pools)))
        groups = [i % c.speed_groups for i in range(len(pools))]
        speeds = [float(group_factor[g] * own[i]) for i, g in enumerate(groups)]
    return [ServerSpec(i, gpu, c.gpus_per_server, pool, groups[i], speeds[i]) for i, (gpu, pool) in enumerate(pools)]


def mean_gpu_seconds(w: SyntheticWorkload) -> float:
    """E[GPUs x duration] of a synthetic job (GPUs and duration are drawn independently; the
    duration is a log-normal mixture clipped to [min, max]: exact partial expectations)."""
    phi = lambda z: 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))  # noqa: E731
    lo, hi = math.log(w.min_duration_s), math.log(w.max_duration_s)
    duration = 0.0
    for weight, mu, sigma in w.duration_mixture:
        if sigma == 0.0:
            duration += weight * min(max(math.exp(mu), w.min_duration_s), w.max_duration_s)
            continue
        below, above = phi((lo - mu) / sigma), 1.0 - phi((hi - mu) / sigma)
        middle = math.exp(mu + sigma**2 / 2) * (phi((hi - mu - sigma**2) / sigma) - phi((lo - mu - sigma**2) / sigma))
        duration += weight * (w.min_duration_s * below + w.max_duration_s * above + middle)
    return duration * sum(g * p for g, p in w.gpu_demand)


def build(s: Scenario, seed: int) -> Built:
    """Draw the scenario's jobs and inference noise for ``seed`` (independent streams)."""
    streams = [np.random.default_rng(x) for x in np.random.SeedSequence(seed).spawn(7)]
    wl_rng, attr_rng, inf_rng, fail_rng, pol_rng, machine_rng, jobs_rng = streams
    servers = servers_of(s.cluster, machine_rng)
    w = s.workload
    training_gpus = sum(x.num_gpus for x in servers if x.pool == Pool.TRAINING)
    largest = max(training_gpus, s.cluster.inference_servers * s.cluster.gpus_per_server)
    if w.trace:
        rows = load_trace(w.trace, max_gpus_per_job=largest)
    else:
        syn = w.synthetic
        if w.load > 0:
            rate = w.load * training_gpus * 3600.0 / mean_gpu_seconds(syn)
            syn = dataclasses.replace(syn, arrival_rate_per_hour=rate, duration_days=None)
        rows = generate(syn, wl_rng)
    rows = sorted(rows, key=lambda r: r.submit_time)
    if w.first_job or w.num_jobs:
        end = w.first_job + w.num_jobs if w.num_jobs else len(rows)
        if w.first_job >= len(rows):
            raise ConfigError(f"workload.first_job={w.first_job} but the workload has only {len(rows)} jobs.")
        rows = rows[w.first_job : end]
    t0 = rows[0].submit_time
    rows = [dataclasses.replace(r, submit_time=r.submit_time - t0) for r in rows]
    if t0 and any(r.deadline is not None for r in rows):
        rows = [dataclasses.replace(r, deadline=r.deadline - t0) if r.deadline is not None else r for r in rows]
    jobs = s.make_jobs(build_jobs(rows, w.attributes, attr_rng, max_gpus_per_job=largest), jobs_rng)
    demand = DemandCurve(s.inference, s.cluster.inference_servers, inf_rng) if s.cluster.inference_servers else None
    return Built(s, seed, servers, jobs, demand, fail_rng, pol_rng)


def simulate(
    s: Scenario,
    policy: Scheduler,
    seed: int,
    log: bool = False,
    throughput: ThroughputModel | None = None,
) -> SimResult:
    """Run ``policy`` on scenario ``s`` for ``seed``."""
    b = build(s, seed)
    if hasattr(policy, "use_rng"):  # randomised policies draw from the run's own policy stream
        policy.use_rng(b.policy_rng)
    engine = Engine(b.servers, b.jobs, policy, throughput or shared_throughput(), b.demand, s.sim, b.failure_rng, log)
    return engine.run()


@functools.lru_cache(maxsize=1)
def shared_throughput() -> ThroughputModel:
    """One speed model per process (it only caches pure lookups)."""
    return ThroughputModel()


__all__ = ["ITP_TRACE", "TraceError", "math"]
