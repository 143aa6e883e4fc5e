"""How fast a job trains on a given allocation: ``speedup`` and ``rate``.

Profiled models (bert, cifar10, deepspeech2, imagenet = ResNet-50, ncf, yolov3) use the step times
that the AdaptDL authors measured for Pollux (OSDI'21): ``data/throughput/<app>_placements.csv``
(1-16 GPUs on 1-4 nodes of 4 GPUs) and ``<app>_scalability.csv`` (6-64 GPUs on 6-16 nodes), from
petuum/adaptdl, branch osdi21-artifact, Apache-2.0 (see ``data/throughput/NOTICE``). To our
knowledge they were measured on 4-GPU T4 nodes; we use them only as *relative* curves.

For each profiled local batch ``b`` we average the rows of each (GPUs ``n``, nodes ``k``) and fit
Pollux's step-time model (Qiao et al., OSDI'21: compute + sync, taken without overlap, gamma = 1)
with an extra per-node term, by non-negative least squares::

    step(1, 1)  = t1                                      (single-GPU row, exact)
    inter(n, k) = a_n + b_n (n - 2) + d_n (k - 2)         (k >= 2 nodes)
    intra(n)    = min(a_r + b_r (n - 2) / n, inter(n, 2))   (one node)
    step(n, k)  = t1 + (intra(n) if k == 1 else inter(n, k))

Our servers hold 8 GPUs, the profiled nodes 4, so one server's fit must extrapolate from 2-4 GPUs
to 8: we replace Pollux's intra-node ``(n - 2)`` by ``(n - 2) / n`` (ring all-reduce moves
``2 (n-1) / n`` gradients per GPU, which saturates), and cap it by the two-server cost so packing
is never slower than spreading. A job over several servers pays the multi-node cost, indexed by
its GPU and server counts (the fitted ``d_n`` is ~0 at the chosen batches, where spreading wider
than two servers costs nothing measurable, and > 0 at small batches). The fit is linear in n, so
beyond 64 GPUs / 16 nodes the step time keeps growing linearly and samples/s saturates towards
``b / b_n``: positive and concave.
Fit error, speed-up against the per-(n, k) means at the chosen batches: median 2-4 % (ncf 9 %),
imagenet at most 8 %; bert's and yolov3's two-node rows are up to 50 % slower than the fit (the
profiles' two-node runs are anomalously slow; the fit follows the other 100+ points).
Step times at a batch between two profiled ones are interpolated linearly; below the smallest
profiled batch the step time is held constant (pessimistic).

Other models use a ring all-reduce model: ``step = overhead + c * b + 2 (n-1)/n * 4 P / BW`` with
``BW`` NVLink inside one server and the network across servers (constants below).

Memory: a model needs ``m0 + m1 * b`` GB per GPU (fp32 training; our assumptions, tables below).
If that exceeds the GPU's memory the local batch is halved until it fits. Finally

    samples/s = n * b / step(n, k, b) * gpu.speed
    speedup   = samples/s / samples/s(1 GPU of REFERENCE_GPU)
"""

from __future__ import annotations

import bisect
import csv
import itertools
import os
from collections import defaultdict
from fractions import Fraction
from pathlib import Path
from typing import NamedTuple

import numpy as np

from envs.sim.model import REFERENCE_GPU, GpuType, JobSpec

# Trace model names (normalised: lower case, no "-", "_" or spaces) -> profile file prefix.
_ALIASES = {
    "resnet50": "imagenet",
    "imagenet": "imagenet",
    "bert": "bert",
    "deepspeech2": "deepspeech2",
    "yolov3": "yolov3",
    "cifar10": "cifar10",
    "ncf": "ncf",
}

# Profiled apps: (local batch, memory base GB, memory GB per sample). The local batch is the
# largest one profiled in both files, i.e. over the whole 1-64 GPU range (jobs fill their GPUs;
# Aryl scales jobs without changing it). Memory is our fp32 estimate, not from the profiles.
_PROFILED: dict[str, tuple[float, float, float]] = {
    # ResNet-50 224px, SGD: ~0.4 GB weights/grads/momentum + ~1.1 GB context; ~0.1 GB/img
    # (fp32 recipes fit ~100-128 img in 16 GB) -> 21.5 GB at 200: halved to 100 on a T4.
    "imagenet": (200, 1.5, 0.10),
    # bert-base-uncased SQuAD, seq 384, Adam (the AdaptDL job uses 12/GPU): google-research/bert
    # reports batch 12 as the most that fits in 12 GB -> 2.8 + 12 * 0.75 = 11.8 GB.
    "bert": (12, 2.8, 0.75),
    # DeepSpeech2 (deepspeech.pytorch), ~0.15 GB per utterance -> 13.5 GB at 80.
    "deepspeech2": (80, 1.5, 0.15),
    # YOLOv3 (416-608 px), ~1 GB per image -> 9.5 GB at 8.
    "yolov3": (8, 1.5, 1.0),
    # ResNet-18 on 32px CIFAR-10 images, ~4 MB per image -> 5.1 GB at 1024.
    "cifar10": (1024, 1.0, 0.004),
    # NCF on MovieLens: embeddings dominate, ~10 KB per sample -> 1.1 GB.
    "ncf": (5803, 1.0, 1e-5),
}

# Analytic models: (parameters, V100 fp32 seconds per sample, local batch, memory base GB,
# memory GB per sample). Compute is ~3x forward FLOPs at ~8-10 effective fp32 TFLOPS.
_ANALYTIC: dict[str, tuple[float, float, float, float, float]] = {
    # VGG-16 (Simonyan & Zisserman 2015): 138M params, 15.5 GFLOP/img fwd, ~200 img/s -> 13.4 GB.
    "vgg16": (138e6, 5.0e-3, 64, 2.5, 0.17),
    # GPT-2 small (Radford et al. 2019): 124M params, seq 1024, ~0.8 TFLOP/sample; Adam state
    # 2 GB + ~2.4 GB activations/sample (Korthikanti et al. 2022, x2 for fp32) -> 22.2 GB at 8.
    "gpt2": (124e6, 8.0e-2, 8, 3.0, 2.4),
    # Inception-v3 (Szegedy et al. 2016): 24M params, 5.7 GFLOP/img at 299px -> 10.5 GB at 64.
    "inception3": (24e6, 4.5e-3, 64, 1.5, 0.14),
}
# Any other model: a mid-sized CNN-like default (50M params) -> 6.8 GB at 32.
_GENERIC = (50e6, 5.0e-3, 32, 2.0, 0.15)
_STEP_OVERHEAD_S = 0.01  # optimizer step and launch latency per step (analytic models)
_INTRA_BW = 100e9  # bytes/s: effective NCCL bus bandwidth over NVLink inside one V100 server
_INTER_BW = 25e9 / 8  # bytes/s: a 25 Gbit/s network between servers
_GRAD_BYTES = 4  # fp32 gradients


def packed_servers(workers: int, gpus_per_server: int = 8) -> int:
    """Fewest servers that hold ``workers`` GPUs: ``ceil(workers / gpus_per_server)``, at least 1."""
    return max(1, -(-workers // gpus_per_server))


def _solve(m: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction] | None:
    """``x`` with ``m x = rhs`` exactly (Gauss-Jordan in rationals), or None where ``m`` is singular."""
    rows = [[*r, v] for r, v in zip(m, rhs, strict=True)]
    for i in range(len(rows)):
        pivot = next((r for r in range(i, len(rows)) if rows[r][i]), None)
        if pivot is None:
            return None
        rows[i], rows[pivot] = rows[pivot], rows[i]
        for r in range(len(rows)):
            if r != i and rows[r][i]:
                f = rows[r][i] / rows[i][i]
                rows[r] = [x - f * p for x, p in zip(rows[r], rows[i], strict=True)]
    return [r[-1] / r[i] for i, r in enumerate(rows)]


def _nnls(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares for a handful of columns: the best non-negative solution over
    the column subsets, each the exact least-squares solution (its normal equations solved in
    rationals) rounded once, so that the fit has the same bits on every CPU (a BLAS's least
    squares ends in bits that follow the kernels it picks for the CPU)."""
    rows = [[Fraction(v) for v in r] for r in a.tolist()]
    ys = [Fraction(v) for v in y.tolist()]
    n = a.shape[1]
    gram = [[sum((r[i] * r[j] for r in rows), Fraction(0)) for j in range(n)] for i in range(n)]
    ay = [sum((r[i] * v for r, v in zip(rows, ys, strict=True)), Fraction(0)) for i in range(n)]
    yy = sum((v * v for v in ys), Fraction(0))
    best, best_res = [Fraction(0)] * n, yy
    for size in range(1, n + 1):
        for cols in itertools.combinations(range(n), size):
            x = _solve([[gram[i][j] for j in cols] for i in cols], [ay[i] for i in cols])
            if x is None or min(x) < 0:
                continue
            res = yy - sum(  # |y - A x|^2 at the least-squares x
                (v * ay[c] for c, v in zip(cols, x, strict=True)), Fraction(0)
            )
            if res < best_res:
                best, best_res = [Fraction(0)] * n, res
                for c, v in zip(cols, x, strict=True):
                    best[c] = v
    return np.array([float(v) for v in best])


class _Fit(NamedTuple):
    """Fitted step-time model of one app at one local batch (see the module docstring)."""

    t1: float
    a_r: float
    b_r: float
    a_n: float
    b_n: float
    d_n: float

    def step(self, n: int, k: int) -> float:
        if n == 1:
            return self.t1
        inter = self.a_n + self.b_n * (n - 2) + self.d_n * (max(k, 2) - 2)
        return self.t1 + (min(self.a_r + self.b_r * (n - 2) / n, inter) if k == 1 else inter)


def _norm(model: str) -> str:
    return model.lower().replace("-", "").replace("_", "").replace(" ", "")


def _fit_batch(b: float, base_gb: float, per_sample_gb: float, memory_gb: float) -> float:
    """Halve the local batch until ``base + per_sample * b`` fits (never below one sample)."""
    while base_gb + per_sample_gb * b > memory_gb and b >= 2:
        b /= 2
    return b


class ThroughputModel:
    """Speed-up and progress rate of a job on ``workers`` GPUs spread over ``servers`` servers.

    :param profile_dir: folder of ``<app>_placements.csv`` / ``<app>_scalability.csv``;
        defaults to ``data/throughput`` next to this module.
    """

    def __init__(self, profile_dir: str | os.PathLike[str] | None = None) -> None:
        default = Path(__file__).parent / "data" / "throughput"
        self._dir = Path(profile_dir) if profile_dir is not None else default
        self._fits: dict[str, tuple[list[float], list[_Fit]]] = {}
        self._speedups: dict[tuple[str, int, int, GpuType], float] = {}
        self._rates: dict[tuple[str, int, int, int, GpuType], float] = {}

    def known(self, model: str) -> bool:
        """Whether ``model`` has a measured profile (``True``) or uses the analytic fallback."""
        return _norm(model) in _ALIASES

    def speedup(self, model: str, workers: int, servers: int, gpu_type: GpuType = REFERENCE_GPU) -> float:
        """Samples/s of ``workers`` GPUs of ``gpu_type`` over ``servers`` servers, divided by the
        samples/s of one worker on one reference GPU. Always > 0; cached after the first call.

        :raises ValueError: unless ``1 <= servers <= workers``.
        """
        key = (model, workers, servers, gpu_type)
        value = self._speedups.get(key)
        if value is None:
            if workers < 1 or not 1 <= servers <= workers:
                raise ValueError(f"need 1 <= servers <= workers, got {workers=} {servers=}")
            name = _norm(model)
            value = self._samples_per_s(name, workers, servers, gpu_type) / self._samples_per_s(
                name, 1, 1, REFERENCE_GPU
            )
            self._speedups[key] = value
        return value

    def rate(self, job: JobSpec, workers: int, servers: int, gpu_type: GpuType = REFERENCE_GPU) -> float:
        """Progress per second: ``speedup`` on this allocation over ``speedup`` on the job's
        requested GPUs packed on 8-GPU reference servers; 1.0 there (the trace's duration)."""
        key = (job.model, job.num_gpus, workers, servers, gpu_type)
        value = self._rates.get(key)
        if value is None:
            own = self.speedup(job.model, job.num_gpus, packed_servers(job.num_gpus))
            value = self.speedup(job.model, workers, servers, gpu_type) / own
            self._rates[key] = value
        return value

    def _samples_per_s(self, name: str, n: int, k: int, gpu: GpuType) -> float:
        app = _ALIASES.get(name)
        if app is not None:
            b0, base, per = _PROFILED[app]
            b = _fit_batch(b0, base, per, gpu.memory_gb)
            step = self._profiled_step(app, n, k, b)
        else:
            params, per_sample_s, b0, base, per = _ANALYTIC.get(name, _GENERIC)
            b = _fit_batch(b0, base, per, gpu.memory_gb)
            bw = _INTRA_BW if k == 1 else _INTER_BW
            step = _STEP_OVERHEAD_S + per_sample_s * b + 2 * (n - 1) / n * _GRAD_BYTES * params / bw
        return n * b / step * gpu.speed

    def _profiled_step(self, app: str, n: int, k: int, b: float) -> float:
        """Fitted step time at local batch ``b``, linear between profiled batches."""
        if app not in self._fits:
            self._fits[app] = self._fit_app(app)
        batches, fits = self._fits[app]
        i = bisect.bisect_left(batches, b)
        if i == len(batches) or batches[i] == b or i == 0:
            return fits[min(i, len(fits) - 1)].step(n, k)
        w = (b - batches[i - 1]) / (batches[i] - batches[i - 1])
        return (1 - w) * fits[i - 1].step(n, k) + w * fits[i].step(n, k)

    def _fit_app(self, app: str) -> tuple[list[float], list[_Fit]]:
        """Fit ``_Fit`` at every batch profiled in both files (means over shapes per (n, k))."""
        times: dict[int, dict[tuple[int, int], list[float]]] = defaultdict(lambda: defaultdict(list))
        with open(self._dir / f"{app}_placements.csv", newline="") as f:
            for row in csv.DictReader(f):
                digits = [int(c) for c in row["placement"]]
                times[int(row["local_bsz"])][sum(digits), len(digits)].append(float(row["step_time"]))
        scaled: set[int] = set()
        with open(self._dir / f"{app}_scalability.csv", newline="") as f:
            for row in csv.DictReader(f):
                nk = (int(row["num_replicas"]), int(row["num_nodes"]))
                scaled.add(int(row["local_bsz"]))
                times[int(row["local_bsz"])][nk].append(float(row["step_time"]))
        batches: list[float] = []
        fits: list[_Fit] = []
        for b in sorted(scaled):
            mean = {nk: float(np.mean(ts)) for nk, ts in times[b].items()}
            if (1, 1) not in mean:
                continue
            t1 = mean[1, 1]
            intra = [(n, t - t1) for (n, k), t in mean.items() if k == 1 and n > 1]
            inter = [(n, k, t - t1) for (n, k), t in mean.items() if k > 1]
            a_r, b_r = _nnls(
                np.array([[1.0, (n - 2) / n] for n, _ in intra]).reshape(-1, 2),
                np.array([e for _, e in intra]),
            )
            x_inter = np.array([[1.0, n - 2, k - 2] for n, k, _ in inter]).reshape(-1, 3)
            a_n, b_n, d_n = _nnls(x_inter, np.array([e for *_, e in inter]))
            batches.append(float(b))
            fits.append(_Fit(t1, float(a_r), float(b_r), float(a_n), float(b_n), float(d_n)))
        if not fits:
            raise ValueError(f"no usable profile rows for {app!r} in {self._dir}")
        return batches, fits
