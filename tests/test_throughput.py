"""Tests of envs/sim/throughput.py: normalisation, packing, GPU types, fallback, caching, data."""

import csv
import itertools
import math
from pathlib import Path

import pytest

from envs.sim.model import T4, V100, GpuType, JobSpec
from envs.sim.throughput import ThroughputModel, packed_servers

DATA = Path(__file__).resolve().parents[1] / "envs" / "sim" / "data" / "throughput"
PROFILED = ["resnet50", "bert", "deepspeech2", "yolov3", "cifar10", "ncf"]
ANALYTIC = ["vgg16", "gpt2", "inception3", "some-new-model"]


@pytest.fixture(scope="module")
def tm() -> ThroughputModel:
    return ThroughputModel()


def job(model: str, gpus: int) -> JobSpec:
    return JobSpec(0, "j", 0.0, 3600.0, gpus, gpus, gpus, model)


def placement_step(app: str, placement: str, bsz: int) -> float:
    with open(DATA / f"{app}_placements.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["placement"] == placement and int(r["local_bsz"]) == bsz]
    assert len(rows) == 1
    return float(rows[0]["step_time"])


def scalability_step(app: str, replicas: int, nodes: int, bsz: int) -> float:
    with open(DATA / f"{app}_scalability.csv") as f:
        rows = [
            r
            for r in csv.DictReader(f)
            if (int(r["num_replicas"]), int(r["num_nodes"]), int(r["local_bsz"])) == (replicas, nodes, bsz)
        ]
    assert len(rows) == 1
    return float(rows[0]["step_time"])


def test_packed_servers():
    assert [packed_servers(n) for n in (0, 1, 7, 8, 9, 16, 17, 32)] == [1, 1, 1, 1, 2, 2, 3, 4]
    assert packed_servers(12, gpus_per_server=4) == 3


@pytest.mark.parametrize("model", PROFILED + ANALYTIC)
def test_one_reference_gpu_is_speedup_one(tm, model):
    assert tm.speedup(model, 1, 1, V100) == 1.0
    assert tm.speedup(model, 1, 1) == 1.0


@pytest.mark.parametrize("model", PROFILED + ANALYTIC)
@pytest.mark.parametrize("gpus", [1, 2, 3, 4, 8, 12, 16, 32, 64])
def test_rate_is_one_on_requested_gpus_packed_on_v100(tm, model, gpus):
    assert tm.rate(job(model, gpus), gpus, packed_servers(gpus), V100) == pytest.approx(1.0, abs=1e-12)


def test_rate_is_relative_to_the_requested_allocation(tm):
    j = job("resnet50", 8)
    assert tm.rate(j, 4, 1) == pytest.approx(tm.speedup("resnet50", 4, 1) / tm.speedup("resnet50", 8, 1))
    assert tm.rate(j, 4, 1) < 1.0 < tm.rate(j, 16, 2)
    t4 = tm.rate(j, 8, 1, T4)
    assert t4 == pytest.approx(tm.speedup("resnet50", 8, 1, T4) / tm.speedup("resnet50", 8, 1), rel=1e-12)
    assert 0.25 < t4 < 1 / 3  # T4 speed 1/3, and resnet50's batch is halved to fit 16 GB


@pytest.mark.parametrize("model", PROFILED + ANALYTIC)
def test_spreading_is_never_faster(tm, model):
    for n in range(2, 97):
        speeds = [tm.speedup(model, n, k) for k in range(packed_servers(n), min(n, 24) + 1)]
        assert all(a >= b for a, b in itertools.pairwise(speeds)), (model, n, speeds)
    # crossing from one server to two costs something for every model at 8 GPUs
    assert tm.speedup(model, 8, 2) <= tm.speedup(model, 8, 1)


@pytest.mark.parametrize("model", PROFILED + ANALYTIC)
def test_speedup_is_positive_and_at_most_linear(tm, model):
    for n in [1, 2, 5, 8, 16, 33, 64, 128, 256, 1024]:
        s = tm.speedup(model, n, packed_servers(n))
        assert 0 < s <= n + 1e-9 and math.isfinite(s)


@pytest.mark.parametrize("model", PROFILED)
def test_extrapolation_beyond_profiles_keeps_growing(tm, model):
    speeds = [tm.speedup(model, n, n // 8) for n in range(16, 513, 8)]
    assert all(b > a for a, b in itertools.pairwise(speeds))


@pytest.mark.parametrize("model", ["resnet50", "bert"])
def test_elastic_models_scale_up_to_a_full_server(tm, model):
    speeds = [tm.speedup(model, n, 1) for n in range(1, 9)]
    assert all(b > a for a, b in itertools.pairwise(speeds))
    assert speeds[-1] > 6.5  # 8 GPUs on one server: > 80 % efficiency
    assert tm.speedup(model, 32, 4) > tm.speedup(model, 16, 2) > tm.speedup(model, 8, 1) * 1.05


@pytest.mark.parametrize("model", ["bert", "vgg16", "inception3", "cifar10", "some-new-model"])
def test_t4_is_exactly_a_third_when_the_model_fits_in_16gb(tm, model):
    for n, k in [(1, 1), (4, 1), (8, 1), (16, 2), (24, 5)]:
        assert tm.speedup(model, n, k, T4) == pytest.approx(tm.speedup(model, n, k, V100) / 3, rel=1e-12)


@pytest.mark.parametrize("model", ["resnet50", "gpt2"])
def test_t4_is_slower_than_a_third_when_the_batch_is_halved(tm, model):
    assert tm.speedup(model, 1, 1, T4) < 1 / 3 - 1e-3
    big_t4 = GpuType("T4-32GB", 32.0, 1 / 3, 1.0)  # same speed with enough memory: exactly 1/3
    assert tm.speedup(model, 1, 1, big_t4) == pytest.approx(1 / 3, rel=1e-12)


def test_resnet50_on_t4_matches_the_csv_by_hand(tm):
    # batch 200 needs 1.5 + 0.1 * 200 = 21.5 GB > 16: halved to 100 (11.5 GB), whose step time
    # is interpolated between the profiled single-GPU rows at batch 81 and 115.
    t81, t115, t200 = (placement_step("imagenet", "1", b) for b in (81, 115, 200))
    w = (100 - 81) / (115 - 81)
    t100 = (1 - w) * t81 + w * t115
    expected = (100 / t100) / (200 / t200) / 3
    assert tm.speedup("resnet50", 1, 1, T4) == pytest.approx(expected, rel=1e-12)
    assert 0.30 < expected < 0.32  # hand check: 100 / 0.4983 / (200 / 0.9235) / 3 = 0.309


@pytest.mark.parametrize(
    ("n", "k", "raw_step"),
    [
        (4, 1, lambda: placement_step("imagenet", "4", 200)),
        (8, 2, lambda: placement_step("imagenet", "44", 200)),
        (16, 4, lambda: placement_step("imagenet", "4444", 200)),
        (32, 8, lambda: scalability_step("imagenet", 32, 8, 200)),
        (64, 16, lambda: scalability_step("imagenet", 64, 16, 200)),
    ],
)
def test_imagenet_follows_the_measured_profile(tm, n, k, raw_step):
    # Documented fit tolerance for imagenet at batch 200: within 8 % of every (n, k) mean.
    measured = n * placement_step("imagenet", "1", 200) / raw_step()
    assert tm.speedup("imagenet", n, k) == pytest.approx(measured, rel=0.05)


def test_analytic_fallback_by_hand(tm):
    # vgg16: 138M fp32 params, 5 ms/sample, batch 64, 10 ms overhead; 2 GPUs over 2 servers:
    # sync = 2 * (1/2) * 4 * 138e6 / 3.125e9 = 0.17664 s; compute = 0.01 + 0.32 = 0.33 s.
    assert tm.speedup("vgg16", 2, 2) == pytest.approx(2 * 0.33 / (0.33 + 0.17664), rel=1e-12)
    # same two GPUs in one server over NVLink: sync = 4 * 138e6 / 100e9 = 0.00552 s
    assert tm.speedup("vgg16", 2, 1) == pytest.approx(2 * 0.33 / (0.33 + 0.00552), rel=1e-12)


def test_known_and_aliases(tm):
    assert tm.known("resnet50") and tm.known("ResNet-50") and tm.known("BERT") and tm.known("imagenet")
    assert not tm.known("vgg16") and not tm.known("gpt2") and not tm.known("no-such-model")
    assert tm.speedup("ResNet50", 16, 2) == tm.speedup("imagenet", 16, 2)
    assert tm.speedup("Bert", 5, 1, T4) == tm.speedup("bert", 5, 1, T4)


def test_unknown_models_use_the_generic_default(tm):
    a, b = tm.speedup("my-model", 16, 2), tm.speedup("another", 16, 2)
    assert a == b and 1.0 < a < 16.0
    assert tm.rate(job("my-model", 4), 8, 1) > 1.0


def test_caching_and_determinism(tm):
    first = tm.speedup("deepspeech2", 24, 3, T4)
    assert tm.speedup("deepspeech2", 24, 3, T4) is first
    assert ThroughputModel().speedup("deepspeech2", 24, 3, T4) == first
    assert ThroughputModel(profile_dir=DATA).speedup("deepspeech2", 24, 3, T4) == first
    j = job("bert", 8)
    assert tm.rate(j, 16, 2) is tm.rate(j, 16, 2)


@pytest.mark.parametrize(("workers", "servers"), [(0, 1), (2, 0), (2, 3), (-1, -1)])
def test_invalid_allocations_raise(tm, workers, servers):
    with pytest.raises(ValueError, match="servers"):
        tm.speedup("bert", workers, servers)
