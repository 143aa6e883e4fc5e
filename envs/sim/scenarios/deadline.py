"""``deadline``: MLFS's setting (Wang, Liu, Shen, CoNEXT'20). Data-parallel and model-parallel
training jobs with deadlines, urgency levels, learning curves and required accuracies on an
80-GPU cluster that is overloaded at times, so that MLFS's load control (migration off crowded
servers, early stops at the required accuracy) has something to do.

What each job carries, and where it comes from (the fields are ``JobSpec``'s; the learning
curve, task tree and resource demand types are in ``envs/sim/accuracy.py``):

- **Cluster** (the paper's real-experiment scale): 10 servers x 8 V100 = 80 GPUs, no inference
  pool (MLFS is not about loaning). Co-located jobs slow each other (``sim.contention = 0.05``:
  a job runs ``1 / (1 + 0.05 k)`` as fast while ``k`` other jobs share one of its servers; the
  project's ``default`` value), so crowding a server really costs, and spreading load pays.
- **Arrivals, GPUs, durations**: the synthetic generator with the shipped ITP sample's GPU mix
  (``ITP_GPU_DEMAND``: 80% 1 GPU, 17% 8 GPUs, 1.6% 32 GPUs) and duration mixture
  (``ITP_DURATION_MIXTURE``, median ~2.2 h, heavy tail), Poisson arrivals at an offered load of
  0.9 x the 80 GPUs (as the other scenarios), 1,860 jobs per episode (the paper's real
  experiment ran 1,860 jobs on 80 GPUs). Rigid gangs: no elastic jobs, one GPU type.
- **Model-parallel jobs** (ours): a job with >= 2 GPUs is model-parallel with probability
  ``model_parallel_fraction`` = 0.5. Its model is cut into ``T = min(GPUs, max_partitions = 8)``
  partitions, one task per GPU partition (a 32-GPU job: 8 stages of 4 data-parallel GPUs), with
  shares ``S_k / S_J`` from a symmetric Dirichlet(2) and dependencies forming a chain (a
  pipeline, GPipe / PipeDream style) with probability 0.5, else a random recursive tree (task
  ``k`` depends on a uniform earlier task). How the simulator runs it: as **one gang** whose
  workers hold its partitions; it starts, migrates and ends as a unit (the engine knows no task
  dependencies); the task tree enters MLFS's priority (a task adds 0.8 x the priorities of the
  tasks that depend on it; the job ranks by its root task).
- **Deadline** (the paper): ``submit + max(1.1 x estimated run time, U[0.5, 24] h)``, the
  estimated run time being the job's duration alone on its requested GPUs (a perfect estimate).
- **Urgency** ``L_J`` (ours; the paper contrasts time-critical jobs such as hurricane-path
  prediction with time-tolerant ones): levels 1 / 2 / 3 with probabilities 0.5 / 0.3 / 0.2.
- **Learning curve** (``LearningCurve``, formulas in ``accuracy.py``): ``iterations = duration /
  U[1, 4] s`` (iterations of distributed training take seconds); ``f0`` log-uniform on
  [0.02, 0.2]; ``k`` uniform on [0.5, 1.5] around Optimus' ``k = 1``; untrained accuracy
  ``acc0`` U[0.05, 0.15]; asymptote ``acc_max`` U[0.70, 0.95] (all ours). At ``f0 = 0.05``,
  ``k = 1`` a job reaches 90% of its final accuracy gain at 30% of its work, 95% at 48%.
- **Required accuracy** (ours, after SLAQ (Zhang et al., SoCC'17): practitioners often prefer an
  approximate model, "e.g., 95% loss reduction", trained fast): with probability
  ``required_fraction`` = 0.7 a job states one, ``acc0 + q (accuracy(1) - acc0)`` with ``q``
  U[0.90, 0.99] of the gain its full run would bring: always reachable. Such a job accepts an
  early stop once it has reached it; the others must run all their iterations.
- **Communication volume** ``comm_gb`` per iteration (the paper, citing measurements of
  ``970-3,168 MB`` per mini-batch for data-parallel and ``784-1,037 MB`` for model-parallel
  jobs): uniform in those ranges.
- **CPU and host memory** (``ResourceDemand``, ours): ``U[1, 6]`` cores and ``U[8, 40]`` GB per
  GPU, plus 2 cores and 8 GB per task process on each server it runs on; measured usage swings
  by +-20% with the training phase (``U[1, 4]`` cycles over the job's work, uniform phase). A
  server (policy side, ``heuristics/mlfs_load.py``) has 64 cores, 488 GB and a 25 Gbit/s NIC (an
  AWS p3.16xlarge: 8 V100, 64 vCPUs, 488 GiB). So one job alone stays below 90% of a server
  except at the top of its swing (an 8-GPU job at 6 cores/GPU: 50 cores, 60 at +20%), while
  eight 1-GPU jobs average 44 cores and can pass 90% together.

**Which resources are enforced.** The engine enforces GPUs only (capacity, gang, type). CPU,
memory and network are accounted by MLFS from the fields above (its placement keeps servers
below 90%, its load control migrates off servers above); other policies ignore them, and
oversubscribing them slows nobody in the simulator. What does slow jobs is crowding, through
``sim.contention``.

**Reference run** (``evaluate.py --policies mlfs,mlfs-noctl,tiresias,fifo,sjf --scenario deadline
--seeds 0-4``, means): avg JCT mlfs 13.4 ks, mlfs-noctl 47.6 ks, tiresias 147.6 ks, sjf 35.5 ks,
fifo 224.7 ks; deadline hits 0.94 / 0.66 / 0.53 / 0.78 / 0.18; required-accuracy hits 0.98 /
0.66 / 0.52 / 0.78 / 0.18. At load 0.9 the cluster cannot keep up once contention is counted
(every policy's queue grows while jobs arrive), and Tiresias redoes 12,200 GPU-hours of work lost
to its ~5.9 preemptions per job (30-min checkpoints); at ``workload.load=0.6`` the figures are
13.0 / 18.6 / 22.4 / 18.7 ks (mlfs 42% below tiresias, the paper's 34% being of that order).
Early stops carry load control's gain; migrations are rare (1-5 per run).

Needs ``Scenario.make_jobs`` in ``scenarios/base.py`` (the hook through which a scenario adds
attributes the generic workload does not draw); without it the jobs come out without these
features (no deadlines, curves or demands).

Information: ``clairvoyant`` (MLFS's priorities read each job's remaining time r and its
iteration progress, as its paper assumes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated

import numpy as np

from envs.sim.accuracy import LearningCurve, ModelTask, ResourceDemand
from envs.sim.engine import SimConfig
from envs.sim.information import InformationConfig
from envs.sim.model import JobSpec
from envs.sim.scenarios.base import ClusterConfig, Scenario, WorkloadConfig, register
from envs.sim.settings import Each, Num, Settings, Span
from envs.sim.workload import ITP_GPU_DEMAND, AttributeSampler, SyntheticWorkload

# rows of the uniform-draw matrix (append new ones at the end: old draws stay put for a seed)
(
    _MP,
    _CHAIN,
    _URGENCY,
    _WINDOW,
    _ITER,
    _F0,
    _K,
    _ACC0,
    _ACCMAX,
    _REQ,
    _REQ_GAIN,
    _COMM,
    _CPU,
    _MEM,
    _CYCLES,
    _PHASE,
) = range(16)
_NUM_DRAWS = 16


@dataclass(frozen=True)
class MlFeatures(Settings):
    """Samplers of the ML-job features (module docstring for the sources; ranges are uniform).

    :param model_parallel_fraction: probability that a job with >= 2 GPUs is model-parallel.
    :param max_partitions: most tasks (model partitions) of a model-parallel job.
    :param chain_fraction: probability that its tasks form a chain (else a random tree).
    :param share_concentration: Dirichlet concentration of the tasks' model shares.
    :param urgency_levels: the urgency values ``L_J``...
    :param urgency_weights: ...and their probabilities.
    :param deadline_factor: deadline >= submit + this x the estimated run time...
    :param deadline_window_h: ...and >= submit + U[lo, hi] hours.
    :param iteration_s: seconds per iteration at the requested allocation.
    :param curve_f0: range of the curve's ``f0`` (drawn log-uniformly).
    :param curve_k: range of the curve's exponent ``k``.
    :param acc0: range of the untrained accuracy.
    :param acc_max: range of the curve's asymptotic accuracy.
    :param required_fraction: probability that a job states a required accuracy.
    :param required_gain: the requirement as a share of the accuracy gain of the full run.
    :param comm_gb_data: GB per iteration exchanged by a data-parallel job.
    :param comm_gb_model: GB per iteration exchanged by a model-parallel job.
    :param cpus_per_gpu: cores per GPU.
    :param mem_gb_per_gpu: host memory per GPU.
    :param cpus_per_task: cores per task process on a server.
    :param mem_gb_per_task: host memory per task process on a server.
    :param swing: relative amplitude of the usage swing.
    :param cycles: range of the number of swing cycles over the job's work.
    """

    model_parallel_fraction: Annotated[float, Num(ge=0, le=1)] = 0.5
    max_partitions: Annotated[int, Num(ge=1, le=64)] = 8
    chain_fraction: Annotated[float, Num(ge=0, le=1)] = 0.5
    share_concentration: Annotated[float, Num(gt=0)] = 2.0
    urgency_levels: Annotated[tuple[float, ...], Each(Num(gt=0), 1)] = (1.0, 2.0, 3.0)
    urgency_weights: Annotated[tuple[float, ...], Each(Num(ge=0, le=1), 1)] = (0.5, 0.3, 0.2)
    deadline_factor: Annotated[float, Num(gt=0)] = 1.1
    deadline_window_h: Annotated[tuple[float, ...], Span(Num(ge=0))] = (0.5, 24.0)
    iteration_s: Annotated[tuple[float, ...], Span(Num(gt=0))] = (1.0, 4.0)
    curve_f0: Annotated[tuple[float, ...], Span(Num(gt=0))] = (0.02, 0.2)
    curve_k: Annotated[tuple[float, ...], Span(Num(gt=0))] = (0.5, 1.5)
    acc0: Annotated[tuple[float, ...], Span(Num(ge=0, le=1))] = (0.05, 0.15)
    acc_max: Annotated[tuple[float, ...], Span(Num(ge=0, le=1))] = (0.70, 0.95)
    required_fraction: Annotated[float, Num(ge=0, le=1)] = 0.7
    required_gain: Annotated[tuple[float, ...], Span(Num(ge=0, le=1))] = (0.90, 0.99)
    comm_gb_data: Annotated[tuple[float, ...], Span(Num(ge=0))] = (0.97, 3.168)
    comm_gb_model: Annotated[tuple[float, ...], Span(Num(ge=0))] = (0.784, 1.037)
    cpus_per_gpu: Annotated[tuple[float, ...], Span(Num(ge=0))] = (1.0, 6.0)
    mem_gb_per_gpu: Annotated[tuple[float, ...], Span(Num(ge=0))] = (8.0, 40.0)
    cpus_per_task: Annotated[float, Num(ge=0)] = 2.0
    mem_gb_per_task: Annotated[float, Num(ge=0)] = 8.0
    swing: Annotated[float, Num(ge=0, lt=1)] = 0.2
    cycles: Annotated[tuple[float, ...], Span(Num(gt=0))] = (1.0, 4.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.urgency_levels) != len(self.urgency_weights) or not self.urgency_levels:
            raise ValueError("MlFeatures: urgency_levels and urgency_weights must be non-empty and of equal length")
        if not math.isclose(sum(self.urgency_weights), 1.0, abs_tol=1e-6):
            raise ValueError("MlFeatures.urgency_weights must sum to 1")


def _between(u: float, bounds: tuple[float, ...]) -> float:
    lo, hi = bounds[0], bounds[-1]
    return lo + (hi - lo) * u


def task_tree(n: int, chain: bool, shares: np.ndarray, parents: np.ndarray) -> tuple[ModelTask, ...]:
    """``n`` tasks with the given model shares: a chain, or task ``k`` depending on task
    ``parents[k - 1]`` (each < k)."""
    return tuple(
        ModelTask(float(shares[k]), -1 if k == 0 else (k - 1 if chain else int(parents[k - 1]))) for k in range(n)
    )


def add_features(jobs: Sequence[JobSpec], cfg: MlFeatures, rng: np.random.Generator) -> list[JobSpec]:
    """Give each job its ML features (module docstring).

    Randomness: one ``rng.random((16, n))`` (row k: job i's draw for feature k, consumed whether
    or not it is used), then, for each model-parallel job in id order, its shares
    (``rng.gamma``) and, for a tree, its parents (``rng.random``).
    """
    n = len(jobs)
    columns = rng.random((_NUM_DRAWS, n)).T.tolist()
    ucdf = np.cumsum(cfg.urgency_weights)
    out: list[JobSpec] = []
    for j, ui in zip(jobs, columns, strict=True):
        mp = j.num_gpus >= 2 and ui[_MP] < cfg.model_parallel_fraction
        tasks: tuple[ModelTask, ...] = ()
        if mp:
            parts = min(j.num_gpus, cfg.max_partitions)
            shares = rng.gamma(cfg.share_concentration, 1.0, parts)
            shares = shares / shares.sum()
            chain = bool(ui[_CHAIN] < cfg.chain_fraction)
            parents = np.zeros(0, dtype=np.int64)
            if not chain:
                parents = (rng.random(parts - 1) * np.arange(1, parts)).astype(np.int64)
            tasks = task_tree(parts, chain, shares, parents)
        level = min(int(np.searchsorted(ucdf, ui[_URGENCY], side="right")), len(cfg.urgency_levels) - 1)
        window = _between(ui[_WINDOW], cfg.deadline_window_h) * 3600.0
        deadline = j.submit_time + max(cfg.deadline_factor * j.duration, window)
        iteration_s = _between(ui[_ITER], cfg.iteration_s)
        f0_lo, f0_hi = math.log(cfg.curve_f0[0]), math.log(cfg.curve_f0[-1])
        curve = LearningCurve(
            iterations=max(1, round(j.duration / iteration_s)),
            f0=math.exp(f0_lo + (f0_hi - f0_lo) * ui[_F0]),
            k=_between(ui[_K], cfg.curve_k),
            acc0=_between(ui[_ACC0], cfg.acc0),
            acc_max=_between(ui[_ACCMAX], cfg.acc_max),
        )
        required = None
        if ui[_REQ] < cfg.required_fraction:
            gain = _between(ui[_REQ_GAIN], cfg.required_gain)
            required = curve.acc0 + gain * (curve.accuracy(1.0) - curve.acc0)
        comm = _between(ui[_COMM], cfg.comm_gb_model if mp else cfg.comm_gb_data)
        demand = ResourceDemand(
            cpus_per_gpu=_between(ui[_CPU], cfg.cpus_per_gpu),
            mem_gb_per_gpu=_between(ui[_MEM], cfg.mem_gb_per_gpu),
            cpus_per_task=cfg.cpus_per_task,
            mem_gb_per_task=cfg.mem_gb_per_task,
            swing=cfg.swing,
            cycles=_between(ui[_CYCLES], cfg.cycles),
            phase=float(ui[_PHASE]),
        )
        out.append(
            replace(
                j,
                deadline=deadline,
                urgency=float(cfg.urgency_levels[level]),
                curve=curve,
                required_accuracy=required,
                tasks=tasks,
                comm_gb=comm,
                demand=demand,
            )
        )
    return out


@dataclass(frozen=True)
class DeadlineScenario(Scenario):
    """:param ml: the samplers of the jobs' ML features."""

    ml: MlFeatures = field(default_factory=MlFeatures)

    def make_jobs(self, jobs: list[JobSpec], rng: np.random.Generator) -> list[JobSpec]:
        return add_features(jobs, self.ml, rng)


@register("deadline")
def deadline() -> Scenario:
    return DeadlineScenario(
        name="deadline",
        information=InformationConfig(level="clairvoyant"),
        cluster=ClusterConfig(training_servers=10, inference_servers=0),
        workload=WorkloadConfig(
            synthetic=SyntheticWorkload(num_jobs=1860, gpu_demand=ITP_GPU_DEMAND, name_prefix="dl-"),
            load=0.9,
            attributes=AttributeSampler(elastic_fraction=0.0, any_gpu_fraction=0.0),
        ),
        sim=SimConfig(contention=0.05),
    )
