"""A run's numbers do not depend on the CPU it runs on.

numpy's OpenBLAS picks its kernels by CPU, and numpy its loops (on a CPU with AVX-512, its
``exp``, ``log``, ``log1p`` and ``expm1`` end in other bits than the C library's). So the
simulator fits the throughput model exactly (``envs.sim.throughput._nnls``) and takes those
functions from ``envs.sim.libm``. Here the same runs are made in child processes under other
kernels and loops, as another CPU would pick them: ``OPENBLAS_CORETYPE=Sandybridge`` (pre-AVX2
kernels) and ``NPY_DISABLE_CPU_FEATURES`` (numpy without its AVX-512 loops, a no-op on a CPU
without them), and every digest must equal the one of the machine's own choice.

    python tests/test_cpu_identity.py    # print the digests under this process's kernels
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# name -> what another CPU would pick (the machine's own choice runs as well, unchanged)
VARIANTS = {
    "blas-sandybridge": {"OPENBLAS_CORETYPE": "Sandybridge"},
    "numpy-no-avx512": {
        "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"
    },
}

SMALL = {"workload.synthetic.num_jobs": "120"}
RUNS = [  # (scenario, overrides, policies): speed groups and noise, estimates, a fairness plan
    ("cloud", SMALL, ("fifo", "sjf", "aryl")),
    ("default", {**SMALL, "information.level": "estimate"}, ("sjf", "tiresias", "aryl")),
    ("dynamic", {"workload.synthetic.num_jobs": "60"}, ("shockwave", "themis")),
]
OBS_CASES = ("ordering-estimate", "placement-cloud")


def digests() -> dict[str, str]:
    """sha256 of the throughput fit, of each run's per-job results and of some env rollouts."""
    from test_obs_identity import digest

    from envs.sim import scenarios
    from envs.sim.throughput import _PROFILED, ThroughputModel
    from heuristics.registry import make

    out: dict[str, str] = {}
    h = hashlib.sha256()
    model = ThroughputModel()
    for app in sorted(_PROFILED):
        for fit in model._fit_app(app)[1]:
            h.update(repr([float(x).hex() for x in fit]).encode())
    out["throughput fit"] = h.hexdigest()
    for name, overrides, policies in RUNS:
        s = scenarios.get(name, overrides)
        for policy in policies:
            r = scenarios.simulate(s, make(policy), 0)
            h = hashlib.sha256(repr([(j.duration, j.submit_time) for j in r.jobs]).encode())
            h.update(repr([server.speed_factor for server in r.servers]).encode())
            for a in (r.finish, r.first_start, r.preemptions):
                h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
            out[f"{name} {policy}"] = h.hexdigest()
    b = scenarios.build(
        scenarios.get("default", {"workload.synthetic.num_jobs": "5000", "information.level": "estimate"}), 0
    )
    out["estimates"] = hashlib.sha256(repr(b.knowledge).encode()).hexdigest()
    for case in OBS_CASES:
        out[f"obs {case}"] = digest(case)
    return out


@pytest.fixture(scope="module")
def by_variant() -> dict[str, dict[str, str]]:
    """The digests of each child process: the machine's own kernels, then each variant's."""
    found = {}
    for name, env in {"own": {}, **VARIANTS}.items():
        done = subprocess.run(
            [sys.executable, __file__, "--json"],
            env={k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES")}
            | env,
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        found[name] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_numbers_do_not_follow_the_cpu(variant: str, by_variant: dict[str, dict[str, str]]) -> None:
    own, other = by_variant["own"], by_variant[variant]
    assert own.keys() == other.keys()
    differ = [k for k in own if own[k] != other[k]]
    assert not differ, f"{variant} changes {differ}"


if __name__ == "__main__":
    found = digests()
    print(json.dumps(found) if "--json" in sys.argv else "\n".join(f"{v}  {k}" for k, v in found.items()))
