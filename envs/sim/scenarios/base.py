"""The scenario dataclasses, the registry, and ``build`` / ``simulate``."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import numpy as np

from envs.sim import information, libm
from envs.sim.config import ConfigError, apply_overrides
from envs.sim.engine import Engine, SimConfig, SimResult
from envs.sim.feasibility import Unrunnable, UnrunnableError, describe, unrunnable
from envs.sim.inference import DemandCurve, InferenceConfig
from envs.sim.information import InformationConfig, Knowledge
from envs.sim.model import GPU_TYPES, JobSpec, Pool, ServerSpec
from envs.sim.policy import ClusterView, Scheduler
from envs.sim.settings import Check, Choice, Each, Items, Num, Settings, Text
from envs.sim.throughput import ThroughputModel
from envs.sim.workload import (
    GPU_TYPE,
    AttributeSampler,
    SyntheticWorkload,
    TraceError,
    TraceRow,
    build_jobs,
    generate,
    load_trace,
    offered_load,
)

DATA = Path(__file__).resolve().parent.parent / "data"
ITP_TRACE = str(DATA / "traces" / "itp_cluster04_2000.csv")


MAX_SERVERS = 100_000
"""The most servers of one pool (a larger count is a typo)."""


def _mix(text: str) -> list[tuple[str, int]] | None:
    """``"V100-32GB:6,A100-40GB:4"`` -> pairs (``[]`` for ""), or None if malformed."""
    out = []
    for part in text.split(",") if text.strip() else []:
        name, _, count = part.strip().rpartition(":")
        if name not in GPU_TYPES or not count.isdigit() or int(count) > MAX_SERVERS:
            return None
        out.append((name, int(count)))
    return out


TYPE_MAP = Each(Items((Text(), GPU_TYPE)), say="must be NAME:TYPE;NAME:TYPE pairs, each TYPE a known GPU type")
MIX = Check(lambda m: _mix(m) is not None, "must be TYPE:COUNT,... with known GPU types and whole counts", "X:1")


@dataclass(frozen=True)
class ClusterConfig(Settings):
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

    training_servers: Annotated[int, Num(ge=0, le=MAX_SERVERS)] = 16
    training_gpu: Annotated[str, GPU_TYPE] = "V100-32GB"
    inference_servers: Annotated[int, Num(ge=0, le=MAX_SERVERS)] = 24
    inference_gpu: Annotated[str, GPU_TYPE] = "T4-16GB"
    gpus_per_server: Annotated[int, Num(ge=1, le=64)] = 8
    training_mix: Annotated[str, MIX] = ""
    speed_groups: Annotated[int, Num(ge=0)] = 0
    group_sigma: Annotated[float, Num(ge=0)] = 0.15
    server_sigma: Annotated[float, Num(ge=0)] = 0.05

    def __post_init__(self) -> None:
        super().__post_init__()
        if sum(n for _, n in self.training_types()) < 1:
            raise ValueError("the cluster needs at least one training server")

    def training_types(self) -> list[tuple[str, int]]:
        """(GPU type, servers) of the training pool."""
        if not self.training_mix:
            return [(self.training_gpu, self.training_servers)]
        mix = _mix(self.training_mix)
        assert mix is not None  # the field's rule
        return mix


@dataclass(frozen=True)
class WorkloadConfig(Settings):
    """:param trace: a CSV in our schema to replay; empty = the synthetic generator.
    :param synthetic: the synthetic generator's distributions (``num_jobs`` is the episode size).
    :param load: if > 0, the offered load: GPU-hours asked per hour of arrivals, as a share of
        the training pool's GPUs. A synthetic workload draws its arrival rate for it
        (``arrival_rate_per_hour`` is ignored); a trace's window has its submit times stretched
        or compressed by one factor (durations, sizes and order stay as recorded).
    :param attributes: samplers for what the trace lacks.
    :param first_job: the episode's window starts at this job of the trace...
    :param num_jobs: ...and holds this many (0 = all); submit times are rebased to its first job.
    :param unrunnable: what to do with jobs the cluster can never run (``envs/sim/feasibility.py``):
        ``error`` refuses the run with one sentence, ``drop`` leaves them out (counted in the
        run's ``jobs_dropped`` and notes).
    :param gpu_type_map: a trace's own GPU type names -> ours, as ``NAME:TYPE;NAME:TYPE``
        (``G2:A100-40GB;V100M32:V100-32GB``).
    """

    trace: Annotated[str, Text("a CSV the loader checks")] = ""
    synthetic: SyntheticWorkload = field(default_factory=SyntheticWorkload)
    load: Annotated[float, Num(ge=0, le=100)] = 0.0
    attributes: AttributeSampler = field(default_factory=AttributeSampler)
    first_job: Annotated[int, Num(ge=0)] = 0
    num_jobs: Annotated[int, Num(ge=0)] = 0
    unrunnable: Annotated[str, Choice(("error", "drop"))] = "error"
    gpu_type_map: Annotated[tuple[tuple[str, str], ...], TYPE_MAP] = ()


@dataclass(frozen=True)
class Scenario(Settings):
    name: Annotated[str, Text()]
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    information: InformationConfig = field(default_factory=InformationConfig)
    version: Annotated[int, Num(ge=1)] = 1

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
    dropped: tuple[Unrunnable, ...] = ()  # jobs left out as unrunnable (``workload.unrunnable=drop``)
    knowledge: Knowledge = field(default_factory=Knowledge)  # what policies may know of durations


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
        group_factor = libm.exp(rng.normal(0.0, c.group_sigma, c.speed_groups))
        own = libm.exp(rng.normal(0.0, c.server_sigma, len(pools)))
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


def build(s: Scenario, seed: int, borrowing: bool = True) -> Built:
    """Draw the scenario's jobs and inference noise for ``seed`` (independent streams), and check
    that every job can run (``envs/sim/feasibility.py``) under a policy that borrows inference
    servers or, with ``borrowing=False``, one that does not: a job that cannot refuses the run
    with one sentence (:class:`UnrunnableError`), or is left out (``workload.unrunnable=drop``)."""
    streams = [np.random.default_rng(x) for x in np.random.SeedSequence(seed).spawn(8)]
    wl_rng, attr_rng, inf_rng, fail_rng, pol_rng, machine_rng, jobs_rng, info_rng = streams
    servers = servers_of(s.cluster, machine_rng)
    w = s.workload
    training_gpus = sum(x.num_gpus for x in servers if x.pool == Pool.TRAINING)
    largest = max(training_gpus, s.cluster.inference_servers * s.cluster.gpus_per_server)
    if w.trace:
        rows = list(_trace_rows(w.trace, w.gpu_type_map, *_stamp(w.trace)))
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
    if t0:
        rows = [r.at(r.submit_time - t0, None if r.deadline is None else r.deadline - t0) for r in rows]
    if w.trace and w.load > 0:
        rows = at_load(rows, w.load, training_gpus, w.trace)
    jobs = s.make_jobs(build_jobs(rows, w.attributes, attr_rng, max_gpus_per_job=largest), jobs_rng)
    demand = DemandCurve(s.inference, s.cluster.inference_servers, inf_rng) if s.cluster.inference_servers else None
    bad = unrunnable(jobs, servers, demand, borrowing)
    if bad:
        if w.unrunnable == "error" or len(bad) == len(jobs):
            raise UnrunnableError(describe(bad, len(jobs), [r.line for r in rows], w.trace, borrowing))
        keep = sorted(set(range(len(jobs))) - {b.index for b in bad})
        jobs = [dataclasses.replace(jobs[i], job_id=k) for k, i in enumerate(keep)]
    knowledge = information.draw(s.information, jobs, info_rng)
    return Built(s, seed, servers, jobs, demand, fail_rng, pol_rng, tuple(bad), knowledge)


def _stamp(path: str) -> tuple[int, int]:
    try:
        st = Path(path).stat()
    except OSError:
        return (-1, -1)  # the loader names the problem
    return (st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _trace_rows(path: str, type_map: tuple[tuple[str, str], ...], size: int, mtime_ns: int) -> tuple[TraceRow, ...]:
    """A trace's rows, read once per process while the file is unchanged (rows are frozen)."""
    return tuple(load_trace(path, gpu_type_map=dict(type_map)))


def at_load(rows: list[TraceRow], load: float, training_gpus: int, trace: str) -> list[TraceRow]:
    """The trace window's rows with submit times scaled by one factor so that their offered load
    (:func:`~envs.sim.workload.offered_load`) is ``load``; a deadline keeps its slack after submit."""
    have = offered_load(rows, training_gpus)
    if have is None:
        raise ConfigError(
            f"workload.load={load:g}: the jobs of {trace} all arrive at one instant, "
            "so no spacing of their arrivals sets their load."
        )
    f = have / load
    out = []
    for r in rows:
        submit = r.submit_time * f
        deadline = None if r.deadline is None else r.deadline - r.submit_time + submit
        out.append(r.at(submit, deadline))
    return out


def simulate(
    s: Scenario,
    policy: Scheduler,
    seed: int,
    log: bool = False,
    throughput: ThroughputModel | None = None,
    borrowing: bool | None = None,
    observe: Callable[[ClusterView], None] | None = None,
) -> SimResult:
    """Run ``policy`` on scenario ``s`` for ``seed``. ``borrowing``: which jobs must be runnable
    (:func:`build`); by default, those a policy that borrows as ``policy`` does can run.
    ``observe``: see :meth:`Engine.run`."""
    b = build(s, seed, policy.borrows if borrowing is None else borrowing)
    if hasattr(policy, "use_rng"):  # randomised policies draw from the run's own policy stream
        policy.use_rng(b.policy_rng)
    tp = throughput or shared_throughput()
    engine = Engine(b.servers, b.jobs, policy, tp, b.demand, s.sim, b.failure_rng, log, b.knowledge)
    result = engine.run(observe)
    result.dropped = len(b.dropped)
    return result


@functools.lru_cache(maxsize=1)
def shared_throughput() -> ThroughputModel:
    """One speed model per process (it only caches pure lookups)."""
    return ThroughputModel()


__all__ = ["ITP_TRACE", "TraceError", "math"]
