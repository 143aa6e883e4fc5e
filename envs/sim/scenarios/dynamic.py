"""``dynamic``: jobs whose batch size changes during training (Shockwave's setting).

Cluster: 4 servers x 8 V100 (32 GPUs), no inference pool. Sizes of Shockwave's evaluation,
arrival rate scaling with the cluster (see ``workload.load`` below):

=========  ==============================================================================
jobs/GPUs  flags
=========  ==============================================================================
120/32     (the default)
220/64     ``--set workload.synthetic.num_jobs=220 --set cluster.training_servers=8``
460/128    ``--set workload.synthetic.num_jobs=460 --set cluster.training_servers=16``
900/256    ``--set workload.synthetic.num_jobs=900 --set cluster.training_servers=32``
=========  ==============================================================================

Workload, as Shockwave's trace generator (``scheduler/scripts/utils/generate_trace.py`` of
uw-mad-dash/shockwave) draws it: Poisson arrivals; 1/2/4/8 GPUs with probabilities
0.6/0.3/0.09/0.01; durations between 0.2 and 5 h, skewed short. Shockwave picks a duration from
``linspace(0.2 h, 5 h, 100)``: 72% from the 20 shortest, 20% from the next 30, 5% from the next
40, 3% from the 10 longest (mean 4,219 s, median 2,989 s, p90 8,924 s). Ours is the 3-component
log-normal mixture :data:`SHOCKWAVE_DURATION_MIXTURE` fitted to that distribution by EM on
ln(seconds) (400,000 draws), clipped to [720 s, 18,000 s]: mean 4,190 s, p10/p50/p90 1,169 /
3,072 / 9,434 s. The arrival rate is set through ``workload.load`` so that 120 jobs on 32 GPUs
arrive at 90 per hour, Shockwave's 40-s mean inter-arrival time for its 120-job trace; the
rate scales with the GPUs (Shockwave: 10 s for 460 jobs on 128 GPUs, 5 s for 900 on 256; 25 s
for 220 on 64, where ours gives 20 s). The cluster is about 5x overloaded while jobs arrive.

Shockwave's own 120-job reproduction trace is lighter than its generator's GPU mix: 92, 20, 8
and 0 jobs of 1, 2, 4 and 8 GPUs (164 GPUs asked for; the mix gives 197 on average). Its mix,
with the same arrivals: ``--set workload.load=0 --set workload.synthetic.arrival_rate_per_hour=90
--set "workload.synthetic.gpu_demand=1:0.7667;2:0.1667;4:0.0666"`` (see
``benchmarks/shockwave_fairness.py``).

Models: the profiled ones whose throughput was measured at several batch sizes (AdaptDL's
``data/throughput/<app>_placements.csv``): resnet50 (ResNet-50/ImageNet), cifar10 (ResNet-18),
bert and deepspeech2, drawn uniformly (Shockwave's mix: ResNet-18, ResNet-50, Transformer, LM,
Recommendation). Left out (ours): ncf, whose step time is flat in the batch (launch-latency
bound: 8x faster at 16x the batch), and yolov3, whose profile is not monotone in the batch.

Dynamic adaptation (ours, after Shockwave's two modes; ``dynamic.mode_mix`` draws each job's
mode, Shockwave's reproduction traces use 0 / 0.5 / 0.5):

- the job starts at the smallest profiled local batch ``b0`` of its model; its largest useful
  batch ``b_max`` is the profiled batch with the most samples/s on one GPU;
- **Accordion**: small batch ``b0`` in critical regimes: the first ``U[accordion_first_critical]``
  of its work and ``accordion_critical_s`` after each learning-rate decay at the work fractions
  ``accordion_decays``; ``b_max`` everywhere else;
- **GNS**: the batch doubles at fixed epochs: ``D`` doublings, ``b0 * 2**D <= b_max``, at work
  fractions ``i / (D + 1)``, i = 1..D;
- **static**: ``b0`` throughout.

The speed multiplier of a batch ``b`` is ``samples/s(b) / samples/s(b0)``, from the single-GPU
rows of the profile, step time interpolated linearly between profiled batches (as
``throughput.py`` does). A bigger local batch amortises more per-step overhead, so samples/s grow.
Multi-GPU jobs would gain a little more (their synchronisation is amortised too): the one-GPU
figures are a lower bound. Derived multipliers::

    model        b0  b_max  Accordion  GNS (per doubling)
    resnet50     20    200      1.60   1.16 1.42 1.57
    cifar10      32    725      1.95   1.43 1.66 1.84 1.93
    bert          4     12      1.48   1.29
    deepspeech2  10     40      1.66   1.37 1.66

Durations: a drawn duration is the job's run time at ``b0`` (Shockwave's trace fixes the
training steps from the duration at the initial batch); ``JobSpec.duration``, the isolated run
time that slowdown and fairness are measured against, is therefore ``drawn x sum(fraction_i /
multiplier_i)`` over the job's phases. ``JobSpec.speed_regimes`` carries the model's whole
family (1.0, the GNS multipliers, the Accordion one) for every job, static ones included: a
scheduler may know which speeds can occur, not the job's mode or when they occur.

Mechanics (ours): ``checkpoint_interval_s = 0``: a job checkpoints at every round boundary, as
Shockwave's (and Gavel's) runtime does at the end of each lease, so a round-level preemption
loses no work. The restart overhead stays the project's default (30 s + 1 s per GPU per start):
a preempted job pays it when it resumes, so churn costs round-based policies throughput.

The phases are added through ``Scenario.make_jobs`` (the scenario's own seed stream), after the
generic workload has drawn submit times, GPUs, durations and models.

Information: ``clairvoyant`` as Shockwave's repository is: a job's total epochs (its work) is
known, its future batch-size schedule is not (the ``speed_phases`` no policy reads; Shockwave
infers them).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np

from envs.sim.engine import SimConfig
from envs.sim.information import InformationConfig
from envs.sim.model import JobSpec
from envs.sim.scenarios.base import (
    DATA,
    ClusterConfig,
    Scenario,
    WorkloadConfig,
    mean_gpu_seconds,
    register,
)
from envs.sim.settings import Each, Items, Num, Settings, Span
from envs.sim.workload import AttributeSampler, SyntheticWorkload

SHOCKWAVE_GPU_DEMAND: tuple[tuple[int, float], ...] = ((1, 0.6), (2, 0.3), (4, 0.09), (8, 0.01))
"""GPUs per job in Shockwave's generator (``--scale-factor-mix 0.6,0.3,0.09,0.01``)."""

SHOCKWAVE_DURATION_MIXTURE: tuple[tuple[float, float, float], ...] = (
    (0.5058, 7.4968, 0.5087),
    (0.2260, 8.1195, 0.1617),
    (0.2682, 9.0019, 0.4552),
)
"""``(weight, mu, sigma)`` of ln(seconds), fitted to Shockwave's duration draw (module doc)."""

ARRIVALS_PER_GPU_HOUR = 90.0 / 32.0
"""Shockwave's 120-job trace: one arrival every 40 s on 32 GPUs."""

DYNAMIC_MODELS: tuple[str, ...] = ("resnet50", "cifar10", "bert", "deepspeech2")

# model name -> profile file prefix
_APPS = {
    "resnet50": "imagenet",
    "imagenet": "imagenet",
    "cifar10": "cifar10",
    "bert": "bert",
    "deepspeech2": "deepspeech2",
}

STATIC, ACCORDION, GNS = 0, 1, 2


@dataclass(frozen=True)
class BatchFamily:
    """The batch-size schedule family of one model.

    :param b0: initial (and critical-regime) local batch.
    :param b_max: largest useful local batch (most samples/s).
    :param accordion: speed multiplier at ``b_max``.
    :param gns: multipliers after each doubling of ``b0``.
    """

    b0: float
    b_max: float
    accordion: float
    gns: tuple[float, ...]

    @property
    def regimes(self) -> tuple[float, ...]:
        """Every multiplier a job of this model can reach, 1.0 included, sorted."""
        return tuple(sorted({1.0, self.accordion, *self.gns}))


@functools.cache
def _single_gpu_steps(app: str) -> tuple[tuple[float, float], ...]:
    """(local batch, mean step time) of the single-GPU rows of ``<app>_placements.csv``."""
    rows: dict[float, list[float]] = {}
    with open(DATA / "throughput" / f"{app}_placements.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["placement"] == "1":
                rows.setdefault(float(row["local_bsz"]), []).append(float(row["step_time"]))
    return tuple(sorted((b, float(np.mean(t))) for b, t in rows.items()))


def samples_per_s(app: str, batch: float) -> float:
    """One GPU's samples/s at ``batch`` (step time linear between profiled batches)."""
    steps = _single_gpu_steps(app)
    bs = [b for b, _ in steps]
    ts = [t for _, t in steps]
    return batch / float(np.interp(batch, bs, ts))


@functools.cache
def family(model: str) -> BatchFamily | None:
    """The schedule family of ``model`` derived from its profile, or ``None`` if unprofiled."""
    app = _APPS.get(model.lower())
    if app is None:
        return None
    steps = _single_gpu_steps(app)
    b0 = steps[0][0]
    b_max = max(steps, key=lambda s: s[0] / s[1])[0]
    base = samples_per_s(app, b0)
    gns = []
    b = 2 * b0
    while b <= b_max:
        gns.append(samples_per_s(app, b) / base)
        b *= 2
    return BatchFamily(b0, b_max, samples_per_s(app, b_max) / base, tuple(gns))


@dataclass(frozen=True)
class DynamicConfig(Settings):
    """How jobs adapt their batch size (module docstring).

    :param mode_mix: probabilities of the static, Accordion and GNS modes.
    :param accordion_first_critical: the first critical regime covers ``U[lo, hi]`` of the work.
    :param accordion_decays: work fractions of the learning-rate decays (a step schedule).
    :param accordion_critical_s: work fraction of the critical regime after each decay.
    """

    mode_mix: Annotated[tuple[float, float, float], Items((Num(ge=0, le=1), Num(ge=0, le=1), Num(ge=0, le=1)))] = (
        0.0,
        0.5,
        0.5,
    )
    accordion_first_critical: Annotated[tuple[float, float], Span(Num(ge=0, lt=1))] = (0.05, 0.15)
    accordion_decays: Annotated[tuple[float, ...], Each(Num(gt=0, lt=1))] = (0.5, 0.75)
    accordion_critical_s: Annotated[float, Num(ge=0, lt=1)] = 0.05

    def __post_init__(self) -> None:
        super().__post_init__()
        if not math.isclose(sum(self.mode_mix), 1.0):
            raise ValueError(f"DynamicConfig.mode_mix must be 3 probabilities summing to 1, got {self.mode_mix}")


def _merge(points: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """Sort by fraction, clip to [0, 1), keep the last multiplier set at a fraction, drop repeats."""
    at: dict[float, float] = {}
    for frac, mult in sorted(points, key=lambda p: p[0]):
        at[min(max(frac, 0.0), 1.0)] = mult
    out: list[tuple[float, float]] = []
    for frac, mult in sorted(at.items()):
        if frac >= 1.0:
            continue
        if out and out[-1][1] == mult:
            continue
        out.append((frac, mult))
    return tuple(out)


def accordion_phases(fam: BatchFamily, first_critical: float, cfg: DynamicConfig) -> tuple[tuple[float, float], ...]:
    """Small batch in the critical regimes, ``b_max`` elsewhere."""
    points = [(0.0, 1.0), (first_critical, fam.accordion)]
    for d in sorted(cfg.accordion_decays):
        points += [(d, 1.0), (d + cfg.accordion_critical_s, fam.accordion)]
    return _merge(points)


def gns_phases(fam: BatchFamily) -> tuple[tuple[float, float], ...]:
    """The batch doubles at ``i / (D + 1)`` of the work."""
    d = len(fam.gns)
    return _merge([(0.0, 1.0), *((i / (d + 1), m) for i, m in enumerate(fam.gns, start=1))])


def isolated_factor(phases: Sequence[tuple[float, float]]) -> float:
    """``sum(fraction_i / multiplier_i)``: isolated run time over the run time at ``b0``."""
    if not phases:
        return 1.0
    fracs = [p[0] for p in phases] + [1.0]
    return sum((fracs[i + 1] - fracs[i]) / m for i, (_, m) in enumerate(phases))


def adapt_jobs(jobs: Sequence[JobSpec], cfg: DynamicConfig, rng: np.random.Generator) -> list[JobSpec]:
    """Give each job a mode, its speed phases, its model's regimes and its isolated duration.

    Randomness: exactly one ``rng.random((2, n))``: row 0 draws the mode, row 1 the length of
    Accordion's first critical regime (drawn for every job, used by Accordion ones).
    """
    n = len(jobs)
    u = rng.random((2, n))
    cdf = np.cumsum(cfg.mode_mix)
    lo, hi = cfg.accordion_first_critical
    out: list[JobSpec] = []
    for i, j in enumerate(jobs):
        fam = family(j.model)
        if fam is None:
            out.append(j)
            continue
        mode = min(int(np.searchsorted(cdf, u[0, i], side="right")), 2)
        if mode == ACCORDION:
            phases = accordion_phases(fam, lo + (hi - lo) * float(u[1, i]), cfg)
        elif mode == GNS:
            phases = gns_phases(fam)
        else:
            phases = ()
        if len(phases) <= 1:
            phases = ()
        out.append(
            dataclasses.replace(
                j,
                duration=j.duration * isolated_factor(phases),
                speed_phases=phases,
                speed_regimes=fam.regimes,
            )
        )
    return out


@dataclass(frozen=True)
class DynamicScenario(Scenario):
    """:param dynamic: the batch-size adaptation of the jobs."""

    dynamic: DynamicConfig = field(default_factory=DynamicConfig)

    def make_jobs(self, jobs: list[JobSpec], rng: np.random.Generator) -> list[JobSpec]:
        return adapt_jobs(jobs, self.dynamic, rng)


def shockwave_workload(num_jobs: int = 120) -> SyntheticWorkload:
    return SyntheticWorkload(
        num_jobs=num_jobs,
        gpu_demand=SHOCKWAVE_GPU_DEMAND,
        duration_mixture=SHOCKWAVE_DURATION_MIXTURE,
        min_duration_s=720.0,
        max_duration_s=18000.0,
        name_prefix="dyn-",
    )


@register("dynamic")
def dynamic() -> Scenario:
    w = shockwave_workload()
    return DynamicScenario(
        name="dynamic",
        information=InformationConfig(level="clairvoyant"),
        cluster=ClusterConfig(training_servers=4, inference_servers=0),
        workload=WorkloadConfig(
            synthetic=w,
            load=ARRIVALS_PER_GPU_HOUR * mean_gpu_seconds(w) / 3600.0,
            attributes=AttributeSampler(models=DYNAMIC_MODELS, elastic_models=frozenset(), any_gpu_fraction=0.0),
        ),
        sim=SimConfig(checkpoint_interval_s=0.0),
    )
