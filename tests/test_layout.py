"""Observation layout 4: features defined once by name, documented as defined, and alive.

Every feature must vary on some step of some rollout (a feature that never moves is dead
weight, or a bug like layout 3's placement job row, whose ``slack``, ``preemptions`` and
``attained`` never left 0); the env docstrings' tables must list the definitions' names and
meanings in order; the retired ``-v0`` ids are refused with a sentence naming ``-v1``.
"""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest

import envs
from envs.obs import CLUSTER, JOB, SERVER, Features
from envs.ordering import OrderingEnv
from envs.placement import PlacementEnv

ROW = re.compile(r"^\s*\| ([^|]+?) \| (\w+) \| (.+) \|\s*$")


def _table(doc: str) -> list[tuple[str, str]]:
    return [(m.group(2), m.group(3)) for line in doc.splitlines() if (m := ROW.match(line)) and m.group(2) != "feature"]


def test_the_ordering_docstring_lists_the_definitions():
    assert _table(OrderingEnv.__doc__ or "") == [*JOB.items, *CLUSTER.items]


def test_the_placement_docstring_lists_the_definitions():
    left = ("left", "log2(1 + workers still to place) / 6")
    assert _table(PlacementEnv.__doc__ or "") == [*SERVER.items, *JOB.items, left, *CLUSTER.items]


@pytest.mark.parametrize("old", ["loangym/Ordering-v0", "loangym/Placement-v0"])
def test_the_retired_ids_are_refused_naming_v1(old: str):
    with pytest.raises(ValueError, match=rf"{old} is observation layout 3.*use {old.replace('-v0', '-v1')}"):
        gym.make(old)


# Rollouts with random masked actions: scenarios that between them exercise every feature
# (loans and reclaims, deadlines and TE jobs, preemptions, several GPU types, an estimate level).
ROLLOUTS = [
    ("default", {"information.level": "estimate", "workload.synthetic.num_jobs": "80", "sim.mtbf_h": "30"}),
    ("loaning", {"workload.synthetic.num_jobs": "150"}),
    (
        "default",
        {"workload.synthetic.num_jobs": "100", "workload.load": "0", "workload.synthetic.arrival_rate_per_hour": "300"},
    ),
    ("te-be", {"workload.synthetic.num_jobs": "150"}),
    ("cloud", {"workload.synthetic.num_jobs": "80"}),
]
COMPONENTS = {"placement": "aryl", "scaling": "aryl", "reclaim": "aryl", "preemption": "aryl"}


def _rollout(env_id: str, scenario: str, sets: dict[str, str], steps: int) -> list[np.ndarray]:
    kw = COMPONENTS | ({"ordering": "sjf"} if "Placement" in env_id else {})
    env = gym.make(env_id, scenario=scenario, overrides=sets, **kw)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    seen = [obs]
    for _ in range(steps):
        mask = env.unwrapped.action_masks()
        obs, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if term or trunc:
            obs, _ = env.reset()
        seen.append(obs)
    return seen


def _dead(block: np.ndarray, features: Features, present: np.ndarray | None = None) -> list[str]:
    """Features of ``block`` (rows x features) that take a single value over the rows."""
    rows = block if present is None else block[present]
    return [name for name, col in features.col.items() if np.unique(rows[:, col]).size < 2]


def test_every_ordering_feature_varies_over_some_rollout():
    k = 32
    jobs, cluster = [], []
    for scenario, sets in ROLLOUTS:
        for obs in _rollout("loangym/Ordering-v1", scenario, sets, 400):
            jobs.append(obs[: k * len(JOB)].reshape(k, len(JOB)))
            cluster.append(obs[k * len(JOB) :])
    rows = np.concatenate(jobs)
    assert _dead(rows, JOB, rows[:, JOB.col["present"]] > 0) == ["present"]  # every present slot says so
    assert _dead(rows, JOB) == []
    assert _dead(np.array(cluster), CLUSTER) == []


def test_every_placement_feature_varies_over_some_rollout():
    servers, jobs, cluster = [], [], []
    for scenario, sets in ROLLOUTS:
        n = PlacementEnv(scenario=scenario, overrides=sets).num_servers
        off = n * len(SERVER)
        for obs in _rollout("loangym/Placement-v1", scenario, sets, 300):
            servers.append(obs[:off].reshape(n, len(SERVER)))
            jobs.append(obs[off : off + len(JOB)])
            cluster.append(obs[off + len(JOB) + 1 :])
    assert _dead(np.concatenate(servers), SERVER) == []
    assert _dead(np.array(jobs), JOB) == ["present", "fits"]  # the job being placed is there and fits
    assert _dead(np.array(cluster), CLUSTER) == []


def test_the_placement_job_row_is_the_ordering_row_of_the_same_job():
    env = PlacementEnv(scenario="default", overrides={"workload.synthetic.num_jobs": "60"}, ordering="sjf")
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(150):
        core = env.core
        if core.done:
            break
        job = core.placing
        visible, fits = core.choices(env.encoder.slots)
        obs = env._observe()
        off = env.num_servers * len(SERVER)
        if job in visible:
            row = env.encoder.job_rows(visible, fits)[visible.index(job)]
            np.testing.assert_array_equal(obs[off : off + len(JOB)], row)
            checked += 1
        env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
    assert checked > 20


LEVELS = {  # the components an agent runs beside at each level (Aryl needs durations: not at none)
    "estimate": {},
    "none": {"placement": "fifo", "scaling": "fifo", "reclaim": "fifo", "preemption": None},
}


@pytest.mark.parametrize("level", list(LEVELS))
@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_env_checkers_pass_at_every_information_level(env_id: str, level: str):
    from gymnasium.utils.env_checker import check_env as gym_check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    sets = {"workload.synthetic.num_jobs": "40", "information.level": level}
    env = gym.make(env_id, scenario="default", overrides=sets, **LEVELS[level]).unwrapped
    gym_check_env(env, skip_render_check=True)
    sb3_check_env(env, warn=True)


def test_components_that_need_durations_are_refused_at_none():
    with pytest.raises(ValueError, match=r"policy 'aryl' ranks or plans by job durations.*information.level=none"):
        gym.make("loangym/Ordering-v1", overrides={"information.level": "none"})


def test_the_pettingzoo_api_test_passes_at_estimate():
    from pettingzoo.test import api_test

    from envs.dual import env as dual_env

    api_test(dual_env(overrides={"workload.synthetic.num_jobs": "40", "information.level": "estimate"}), num_cycles=300)
