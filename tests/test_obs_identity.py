"""The envs' observations, rewards and masks stay bit-identical across speed-ups.

Each case plays a fixed short rollout (fixed seeds, random valid actions from a fixed RNG, over
episode ends) and hashes every observation, reward, mask and end flag it sees. The digests were
recorded with the code before the incremental observation encoder (issue 21, commit f1ee159):
a speed-up that moves any of them by one bit fails here.

    python tests/test_obs_identity.py      # print the digests of the code as it is now
"""

from __future__ import annotations

import hashlib
import struct
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

DIGESTS = {
    "ordering-aryl": "468ffa4e025cb5367f9d4a58c975af4ee4d29a365d11b5eab901131935568cd2",
    "ordering-estimate": "e50c8604673311bfd8c55d9dd420da8092ce5b2197d43ba3ca86113c3147bd04",
    # re-recorded when fifo began starting elastic jobs at their max size (9dbd096): its starts moved
    "ordering-none-fifo": "75db983990e8b11912e77cc04d2e391727a4fe0980dd72629876f1599bd5f17f",
    "ordering-mlfs-deadline": "45d4a5a0f7d8c79447ef5dd0c2430b900d79dcf2c36a79819180a670d49cbd3f",
    "placement-aryl": "e4174b7788a0325a0cabc34a1c6a3d33591724dd9523bd3a4b06320d9857ee80",
    "placement-cloud": "af4bc017eff1f629887d9ddcc7c7de0a3b4b5a970057b7c448749d5eed4c7ffb",
    "dual-aryl": "c3fe188d0d94ed0c474e4aa4ff6a4433bf62db4e5475f531ddd2231de5f5a70c",
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


@pytest.mark.parametrize("case", sorted(CASES))
def test_observations_unchanged(case: str) -> None:
    assert digest(case) == DIGESTS[case]


if __name__ == "__main__":
    for name in CASES:
        print(f'    "{name}": "{digest(name)}",')
