"""ML job features that MLFS reads: learning curves, model-parallel task trees, resource demands.

Three frozen dataclasses that ``JobSpec`` carries as optional fields (``curve``, ``tasks``,
``demand``); the ``deadline`` scenario draws them, metrics and the MLFS policy read them. Nothing
here touches the engine: the engine runs a job's *work* and does not know what an iteration or an
accuracy is. A job's progress is its work fraction ``f = work_done / work`` in [0, 1].

**Learning curve** (:class:`LearningCurve`, ours). One shape drives loss and accuracy::

    g(f)        = (1 + f / f0) ** (-k)                       normalised excess loss, g(0) = 1
    loss(i)     = g(i / iterations)                          after i of the job's iterations
    accuracy(f) = acc0 + (acc_max - acc0) * (1 - g(f))

``loss`` is the excess over its floor relative to the start (``(l - l_inf) / (l_0 - l_inf)``):
only ratios of loss reductions enter MLFS's priority, so the absolute scale is irrelevant.
The form is the power law of learning curves over training steps: Optimus (Peng et al.,
EuroSys'18) fits ``l(s) = 1 / (b0 s + b1) + b2`` to the training loss, which is ``k = 1``,
``f0 = b1 / (b0 * iterations)``; the "pow" family of Domhan et al. (IJCAI'15) lets the exponent
vary, as ``k`` does here. Accuracy is an affine, decreasing function of the loss (ours: one
shape for both keeps the curve a single, invertible function). ``acc_max`` is the asymptote;
the job's own final accuracy is ``accuracy(1) < acc_max``.

**Task tree** (:class:`ModelTask`). A model-parallel job splits its model into partitions, one
task per GPU partition; ``parent`` is the task whose output this one consumes (``-1`` for the
root, the input layers), so a task's children are the tasks that *depend on it*. Tasks are
listed parents first (``parent < index``). A data-parallel job has no tree: one task holding the
whole model (share 1).

**Resource demand** (:class:`ResourceDemand`). What a job uses besides GPUs, per GPU and per task
process on a server (CPU cores, host memory), its measured usage swinging with the training
phase (ours: a sinusoid over the work fraction), and what it sends over the network per
iteration when its workers span several servers (``JobSpec.comm_gb``). The engine enforces only
GPUs; these are what MLFS's load control *accounts* for (heuristics/mlfs_load.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["DEFAULT_CURVE", "LearningCurve", "ModelTask", "ResourceDemand"]


@dataclass(frozen=True, slots=True)
class LearningCurve:
    """A job's loss and accuracy over its iterations (module docstring for the formulas).

    :param iterations: iterations of the whole job (its work fraction 1).
    :param f0: work fraction at which the excess loss has fallen by ``2 ** -k``: small is fast.
    :param k: power-law exponent, > 0.
    :param acc0: accuracy of the untrained model.
    :param acc_max: accuracy the curve tends to (never reached).
    """

    iterations: int
    f0: float
    k: float
    acc0: float
    acc_max: float

    def __post_init__(self) -> None:
        if self.iterations < 1 or not self.f0 > 0.0 or not self.k > 0.0 or not self.acc_max > self.acc0:
            raise ValueError(f"bad learning curve {self!r}: need iterations >= 1, f0 > 0, k > 0, acc_max > acc0")

    def excess_loss(self, f: float) -> float:
        """``g(f)``: the normalised excess loss at work fraction ``f`` (clipped to [0, 1])."""
        f = min(1.0, max(0.0, f))
        return (1.0 + f / self.f0) ** (-self.k)

    def loss(self, i: int) -> float:
        """Normalised excess loss after ``i`` iterations (``loss(0) == 1``)."""
        return self.excess_loss(i / self.iterations)

    def accuracy(self, f: float) -> float:
        """Accuracy at work fraction ``f``."""
        return self.acc0 + (self.acc_max - self.acc0) * (1.0 - self.excess_loss(f))

    def fraction_for(self, accuracy: float) -> float:
        """Smallest work fraction at which the curve reaches ``accuracy``; ``inf`` if it does not
        within the job's work (0 if the untrained model already does)."""
        if accuracy <= self.acc0:
            return 0.0
        g = 1.0 - (accuracy - self.acc0) / (self.acc_max - self.acc0)
        if g <= 0.0:
            return math.inf
        f = self.f0 * (g ** (-1.0 / self.k) - 1.0)
        return min(f, 1.0) if f <= 1.0 + 1e-9 else math.inf  # the tolerance absorbs rounding at f = 1

    def iteration(self, f: float) -> int:
        """The current iteration ``I`` (1-based) at work fraction ``f``: ``floor(f N) + 1``, at
        most ``N``."""
        return min(self.iterations, int(max(0.0, f) * self.iterations) + 1)

    def last_share(self, current: int) -> float:
        """MLFS's ``dl_{I-1} / sum_{j<I} dl_j``: the share of the loss reduction so far that the
        last completed iteration brought, at current iteration ``I = current``. With no iteration
        done yet (``I <= 1``) there is no reduction so far: 1 (ours: a fresh job is credited with
        all of its next iteration's reduction)."""
        if current <= 1:
            return 1.0
        last = self.loss(current - 1)
        total = 1.0 - last
        if total <= 0.0:
            return 1.0
        return (self.loss(current - 2) - last) / total


DEFAULT_CURVE = LearningCurve(iterations=1000, f0=0.05, k=1.0, acc0=0.1, acc_max=0.9)
"""What MLFS assumes for a job with no curve (other scenarios' jobs): Optimus' ``k = 1`` with
half the excess loss gone at 5% of the work (ours)."""


@dataclass(frozen=True, slots=True)
class ModelTask:
    """One partition of a model-parallel job.

    :param share: ``S_k / S_J``, this task's share of the model's size; the shares sum to 1.
    :param parent: index of the task this one depends on (``-1`` for the root); < own index.
    """

    share: float
    parent: int


@dataclass(frozen=True, slots=True)
class ResourceDemand:
    """What a job uses besides GPUs, on each server it runs on.

    On a server where the job holds ``g`` GPUs it uses ``(cpus_per_task + g * cpus_per_gpu) * m``
    cores and ``(mem_gb_per_task + g * mem_gb_per_gpu) * m`` GB of host memory, where the usage
    multiplier ``m = 1 + swing * sin(2 pi (cycles * f + phase))`` follows the training phase at
    work fraction ``f`` (ours: data loading, evaluation passes and checkpoints make measured usage
    rise and fall over a job's life).

    :param cpus_per_gpu: cores per GPU (data-loader workers, augmentation).
    :param mem_gb_per_gpu: host memory per GPU (pinned buffers, prefetched batches).
    :param cpus_per_task: cores of the job's process group on one server, whatever its GPUs.
    :param mem_gb_per_task: host memory of that process group (framework, CUDA context, dataset cache).
    :param swing: relative amplitude of the usage multiplier, in [0, 1).
    :param cycles: rises and falls over the job's whole work.
    :param phase: where in its cycle the job starts, in [0, 1).
    """

    cpus_per_gpu: float
    mem_gb_per_gpu: float
    cpus_per_task: float = 0.0
    mem_gb_per_task: float = 0.0
    swing: float = 0.0
    cycles: float = 1.0
    phase: float = 0.0

    def multiplier(self, f: float) -> float:
        """The usage multiplier at work fraction ``f``."""
        if self.swing == 0.0:
            return 1.0
        return 1.0 + self.swing * math.sin(2.0 * math.pi * (self.cycles * f + self.phase))

    def cpus(self, gpus: int, f: float) -> float:
        """Cores used on a server where the job holds ``gpus`` GPUs, at work fraction ``f``."""
        return (self.cpus_per_task + gpus * self.cpus_per_gpu) * self.multiplier(f)

    def mem_gb(self, gpus: int, f: float) -> float:
        """Host memory (GB) used on such a server."""
        return (self.mem_gb_per_task + gpus * self.mem_gb_per_gpu) * self.multiplier(f)
