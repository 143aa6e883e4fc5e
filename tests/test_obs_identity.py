"""The envs' observations, rewards and masks stay bit-identical across speed-ups.

Each case plays a fixed short rollout (fixed seeds, random valid actions from a fixed RNG, over
episode ends) and hashes every observation, reward, mask and end flag it sees. The digests were
first recorded with the code before the incremental observation encoder (issue 21, commit f1ee159):
a speed-up that moves any of them by one bit fails here.

The rollouts run in a child process with OpenBLAS's kernels pinned (``OPENBLAS_CORETYPE=Haswell``,
which every x86-64 CPU with AVX2 runs). The throughput model is fitted from the scaling profiles by
LAPACK's least squares, and OpenBLAS picks its kernels by CPU (SkylakeX's on an AVX-512 CPU,
Haswell's on an AVX2 one), each fitting to its own last bits. On an AVX2 machine,
``OPENBLAS_CORETYPE=Sandybridge`` moves six of the seven digests, and the pin moves none.

numpy picks its loops by CPU too: on an AVX-512 CPU its ``exp`` (the engine's speed noise, the
estimates' errors), ``log`` and ``log1p`` and ``expm1`` (the observations) run AVX-512 code whose
last bits differ from the C library's (``np.exp`` and ``math.exp`` differ on 4.6% of draws from
N(0, 0.1)). Unpinned, an AVX-512 machine moves six of the seven digests (the first at the
reward of step 43 of ``ordering-none-fifo``), so ``NPY_DISABLE_CPU_FEATURES`` turns those loops
off, as an AVX2 CPU runs them.

    OPENBLAS_CORETYPE=Haswell NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512F AVX512_SKX" \
        python tests/test_obs_identity.py    # print the digests of the code as it is now
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import envs  # noqa: F401
from envs.dual import DualEnv

SMALL = {"workload.synthetic.num_jobs": "60"}

# name -> (env kind, env kwargs, steps)
CASES: dict[str, tuple[str, dict[str, Any], int]] = {
    "ordering-aryl": ("ordering", {"overrides": SMALL}, 400),
    "ordering-estimate": ("ordering", {"overrides": {**SMALL, "information.level": "estimate"}}, 300),
    "ordering-none-fifo": (
        "ordering",
        {
            "overrides": {**SMALL, "information.level": "none"},
            "placement": "fifo",
            "scaling": "fifo",
            "reclaim": "fifo",
            "preemption": None,
        },
        300,
    ),
    "ordering-mlfs-deadline": (
        "ordering",
        {
            "scenario": "deadline",
            "overrides": SMALL,
            **dict.fromkeys(("placement", "scaling", "reclaim", "preemption"), "mlfs"),
        },
        300,
    ),
    "placement-aryl": ("placement", {"overrides": SMALL}, 400),
    "placement-cloud": ("placement", {"scenario": "cloud", "overrides": SMALL}, 300),
    "dual-aryl": ("dual", {"overrides": SMALL}, 400),
}

PINNED = {
    "OPENBLAS_CORETYPE": "Haswell",
    # numpy's AVX-512 loops (2.4 names them X86_V4, earlier releases AVX512F and AVX512_SKX);
    # names a numpy does not know are ignored
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR",
}
"""the BLAS kernels and numpy loops the digests were recorded with (see the module docstring)"""

DIGESTS = {
    # re-recorded with the Haswell kernels pinned, from the code of cc4fff0, which gave the earlier
    # digests on the machines that recorded and checked them (its CI run passed); an AVX2 machine
    # without the pin gives these
    "ordering-aryl": "d5e1457dee8faffd03aca28cce735064100a2b6d5f55889bea1ce3df1345a21b",
    "ordering-estimate": "6ba20240407693715d3b8cc4a16bfd8a2d4d603cf81516c93628a1af886a55da",
    # re-recorded when fifo began starting elastic jobs at their max size (9dbd096): its starts moved
    "ordering-none-fifo": "a394b89deab236a0f4eecf9bde6ab0538dd42bb82ed1b21fa0b342d0b1c1761b",
    "ordering-mlfs-deadline": "45d4a5a0f7d8c79447ef5dd0c2430b900d79dcf2c36a79819180a670d49cbd3f",
    "placement-aryl": "528598ad3815feb1ceef67986a0e382af70553de3d083ca8488a2ae8ea83a976",
    "placement-cloud": "1e8c1130dfbae788ec81338afc24b883dfe708706c972db7d300ec735d686b9f",
    "dual-aryl": "f30162aaf6f1226e72031a32415d049c9b8fcbe84cfe0ab8970daab7b39e28de",
}


def _feed(h: Any, obs: np.ndarray, reward: Any, mask: np.ndarray, *flags: bool) -> None:
    h.update(np.ascontiguousarray(obs).tobytes())
    h.update(struct.pack("<d", float(reward)))
    h.update(np.asarray(mask, dtype=np.int8).tobytes())
    h.update(bytes(int(f) for f in flags))


def digest(case: str) -> str:
    """The sha256 of everything the rollout ``case`` of :data:`CASES` observes."""
    kind, kwargs, steps = CASES[case]
    h = hashlib.sha256()
    rng = np.random.default_rng(0)
    if kind == "dual":
        env = DualEnv(**kwargs)
        env.reset(seed=0)
        for _ in range(steps):
            agent = env.agent_selection
            if env.terminations[agent] or env.truncations[agent]:
                env.reset()
                continue
            o = env.observe(agent)
            _feed(h, o["observation"], env.rewards[agent], o["action_mask"], agent == "ordering")
            env.step(int(rng.choice(np.flatnonzero(o["action_mask"]))))
        return h.hexdigest()
    env_id = "loangym/Ordering-v1" if kind == "ordering" else "loangym/Placement-v1"
    e: Any = gym.make(env_id, **kwargs).unwrapped
    obs, info = e.reset(seed=0)
    _feed(h, obs, 0.0, info["action_mask"])
    for _ in range(steps):
        obs, reward, terminated, truncated, info = e.step(int(rng.choice(np.flatnonzero(e.action_masks()))))
        _feed(h, obs, reward, info["action_mask"], terminated, truncated)
        if terminated or truncated:
            obs, info = e.reset()
            _feed(h, obs, 0.0, info["action_mask"])
    return h.hexdigest()


@pytest.fixture(scope="module")
def digests() -> dict[str, str]:
    """Every case's digest, computed in one child process with the kernels pinned."""
    done = subprocess.run(
        [sys.executable, __file__, "--json"],
        env=os.environ | PINNED,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("case", sorted(CASES))
def test_observations_unchanged(case: str, digests: dict[str, str]) -> None:
    assert digests[case] == DIGESTS[case]


if __name__ == "__main__":
    if sys.argv[1:] == ["--json"]:
        print(json.dumps({name: digest(name) for name in CASES}))
    else:
        for name in CASES:
            print(f'    "{name}": "{digest(name)}",')
