"""The simulator's vocabulary: GPU types, servers, jobs.

Everything here is a frozen dataclass or an enum. These objects cross every layer (workload
loaders build them, the engine reads them, policies receive them through the read-only
``ClusterView``), so none of them may be mutated once built.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envs.sim.accuracy import LearningCurve, ModelTask, ResourceDemand


class Pool(enum.IntEnum):
    """Which cluster owns a server."""

    TRAINING = 0
    INFERENCE = 1


class JobClass(enum.IntEnum):
    """FitGpp's job classes: trial-and-error (small, interactive) or best-effort (large)."""

    TE = 0
    BE = 1


@dataclass(frozen=True, slots=True)
class GpuType:
    """A GPU model.

    :param name: the name traces and ``JobSpec.gpu_types`` use, e.g. ``"V100-32GB"``.
    :param memory_gb: device memory; a job whose working set does not fit runs with a smaller
        local batch (see ``throughput.py``).
    :param speed: training speed of one GPU relative to the reference type (V100 = 1.0).
    :param price_per_hour: what one GPU-hour costs, for the training-fee metric.
    """

    name: str
    memory_gb: float
    speed: float
    price_per_hour: float

    def __hash__(self) -> int:
        # the name's hash (a str keeps it): equal types have equal names, and the generated
        # hash of all four fields is recomputed on every call (the throughput model's rate
        # cache hashes a type per lookup)
        return hash(self.name)


# Reference types. Speeds: a T4 trains at about 1/3 of a V100 (Aryl, section 2; 65 vs 125
# FP16 tensor TFLOPS and 320 vs 900 GB/s of memory bandwidth). Prices: on-demand cloud list
# prices per GPU-hour (AWS p3.16xlarge / 8 and g4dn.12xlarge / 4, us-east-1), for the fee metric.
V100 = GpuType("V100-32GB", 32.0, 1.0, 3.06)
T4 = GpuType("T4-16GB", 16.0, 1.0 / 3.0, 0.98)
REFERENCE_GPU = V100


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One server (all its GPUs are of one type).

    :param server_id: dense index 0..n-1 used everywhere a server is named.
    :param pool: the cluster that owns it; inference servers reach training jobs only on loan.
    :param group: rack / SKU group; servers of one group are alike (``cloud`` scenario).
    :param speed_factor: this machine's own speed multiplier (``cloud``; 1.0 elsewhere).
    """

    server_id: int
    gpu_type: GpuType
    num_gpus: int
    pool: Pool
    group: int = 0
    speed_factor: float = 1.0


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One training job as submitted.

    :param job_id: dense index 0..n-1 in submission order; what actions and views use.
    :param name: the trace's own id.
    :param submit_time: seconds since the start of the episode.
    :param duration: seconds the job runs alone on ``num_gpus`` GPUs of the reference type,
        packed on as few servers as possible. Slowdown and fairness are measured against it.
    :param num_gpus: GPUs requested (the inelastic demand).
    :param min_gpus: smallest allocation of an elastic job (its base demand); equals
        ``num_gpus`` for an inelastic job.
    :param max_gpus: largest allocation of an elastic job; equals ``num_gpus`` if inelastic.
    :param model: name of the model; selects the scaling curve (``throughput.py``).
    :param gpu_types: names of the GPU types the job may run on; ``None`` means any.
    :param job_class: trial-and-error or best-effort.
    :param priority: larger is more important (used by the policies that read it).
    :param deadline: absolute time the job should finish by, or ``None``.
    :param grace_period: seconds a preempted job needs to checkpoint before its GPUs free up.
    :param user: owner, if the trace has one.
    :param template: the job's recurring template as submitted: the trace's job name (its script
        or template), ``""`` if the trace has none. ``user`` and ``template`` are public knowledge
        a policy may read: they are what a history-based duration predictor (Helios' QSSF, SC'21)
        keys on, matching a job with earlier finished jobs of the same user and template. They
        carry no duration: what they tell comes only from the history of jobs that finished.
    :param speed_phases: dynamic adaptation: ``((work_fraction, multiplier), ...)`` sorted by
        work fraction, the first starting at 0. From that fraction of its work on, the job runs
        ``multiplier`` times faster than its base speed. Empty means a constant speed.
    :param speed_regimes: the multipliers the job's kind of dynamic adaptation can reach (its
        model's batch-size schedule family), sorted, 1.0 included. Public knowledge a scheduler
        may read, unlike ``speed_phases``: it says which speeds may occur, not when or for how
        long. Empty means unknown.
    :param urgency: MLFS's urgency level ``L_J`` (larger is more urgent; 1 = normal).
    :param curve: the job's loss / accuracy over its work (``envs/sim/accuracy.py``), or ``None``.
    :param required_accuracy: the accuracy its user needs; a job with one accepts being stopped
        early once it reaches it (MLFS's overload rule). ``None``: no requirement, never stopped.
    :param tasks: a model-parallel job's task tree, one task per GPU partition (parents first);
        empty for a data-parallel job (one task holding the whole model).
    :param comm_gb: GB the job exchanges per iteration between its servers when it spans several.
    :param demand: CPU / host-memory use besides its GPUs (accounted by MLFS, not enforced).
    """

    job_id: int
    name: str
    submit_time: float
    duration: float
    num_gpus: int
    min_gpus: int
    max_gpus: int
    model: str
    gpu_types: frozenset[str] | None = None
    job_class: JobClass = JobClass.BE
    priority: int = 0
    deadline: float | None = None
    grace_period: float = 0.0
    user: str = ""
    template: str = ""
    speed_phases: tuple[tuple[float, float], ...] = ()
    speed_regimes: tuple[float, ...] = ()
    urgency: float = 1.0
    curve: LearningCurve | None = None
    required_accuracy: float | None = None
    tasks: tuple[ModelTask, ...] = ()
    comm_gb: float = 0.0
    demand: ResourceDemand | None = None

    @property
    def elastic(self) -> bool:
        return self.max_gpus > self.min_gpus

    def allows(self, gpu_type: GpuType) -> bool:
        """Whether the job may run on GPUs of this type."""
        return self.gpu_types is None or gpu_type.name in self.gpu_types


# Other types a trace may name (PAI: P100; public clouds: A100). Speeds relative to a V100 for
# DL training (MLPerf-style ratios: P100 about 0.5x, A100-40GB about 2x).
P100 = GpuType("P100-16GB", 16.0, 0.5, 1.46)
A100 = GpuType("A100-40GB", 40.0, 2.0, 4.10)

# Types the Alibaba GPU 2023 pod list names (``adapters.ALIBABA2023_GPU_TYPES``). A 16 GB V100 is
# the same GV100 chip at the same clocks as the 32 GB part (NVIDIA's V100 datasheet gives both
# 125 FP16 tensor TFLOPS and 900 GB/s), so the same speed; price: AWS p3.2xlarge (one
# V100-SXM2-16GB), us-east-1. An A10 (NVIDIA's A10 datasheet: 24 GB GDDR6 at 600 GB/s, 125 dense
# FP16 tensor TFLOPS) matches a V100's peak tensor rate with 2/3 of its memory bandwidth; its
# speed is taken as 0.8, between the two ratios (an estimate, not a measurement); price: AWS
# g5.xlarge (one A10G, AWS's variant of the A10), us-east-1.
V100_16 = GpuType("V100-16GB", 16.0, 1.0, 3.06)
A10 = GpuType("A10-24GB", 24.0, 0.8, 1.006)
GPU_TYPES: dict[str, GpuType] = {t.name: t for t in (V100, T4, P100, A100, V100_16, A10)}
