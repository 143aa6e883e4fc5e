"""Gymnasium conventions of the single-agent envs: ``render_mode`` (None and "ansi", declared in
``metadata``; any other refused, and none asked of SB3's ``make_vec_env``), and
``invalid_action="advance"`` for algorithms without masks (SB3's plain PPO and DQN train on it),
with the idling guard that keeps a policy that always says "advance" from stalling the cluster."""

from __future__ import annotations

import copy
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs  # noqa: F401
from envs.base import InvalidAction

SMALL = {"overrides": {"workload.synthetic.num_jobs": "30"}}
IDS = ("loangym/Ordering-v1", "loangym/Placement-v1")


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.mark.parametrize("env_id", IDS)
def test_ansi_renders_the_queue_every_server_and_the_loans(env_id):
    env = gym.make(env_id, render_mode="ansi", **SMALL)
    assert env.metadata["render_modes"] == ["ansi"] and env.unwrapped.render_mode == "ansi"
    env.reset(seed=3)
    for _ in range(6):
        env.step(int(np.flatnonzero(env.unwrapped.action_masks())[0]))
    text = env.render()
    assert isinstance(text, str)
    lines = text.splitlines()
    view = env.unwrapped.core.view
    servers = [ln for ln in lines if ln.startswith(("training ", "inference "))]
    assert len(servers) == len(view.servers)
    for line, s in zip(servers, view.servers, strict=True):  # GPUs in use as '#', free as '.'
        bar = line[line.index("[") + 1 : line.index("]")]
        assert bar == "#" * view.used(s.server_id) + "." * view.free(s.server_id)
    assert lines[1].startswith("queue: ") and f"{len(view.pending)} waiting" in lines[0]
    assert lines[-1].startswith("loans: ")
    plain = gym.make(env_id, **SMALL)
    plain.reset(seed=3)
    assert plain.render() is None


@pytest.mark.parametrize("mode", ["rgb_array", "human"])
def test_another_render_mode_is_refused_with_the_modes_named(mode):
    with pytest.raises(TypeError, match=f"render_mode '{mode}' is not supported: loangym's envs render None or 'ansi'"):
        gym.make("loangym/Ordering-v1", render_mode=mode, **SMALL)


def test_sb3_make_vec_env_builds_the_envs_without_a_warning():
    from stable_baselines3.common.env_util import make_vec_env

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        venv = make_vec_env("loangym/Ordering-v1", n_envs=2, env_kwargs=SMALL)
        venv.reset()
    assert [str(w.message) for w in caught] == []
    assert venv.get_attr("render_mode") == [None, None]


@pytest.mark.parametrize("env_id", IDS)
def test_an_action_outside_the_mask_becomes_the_fallback_with_the_penalty(env_id):
    kw = SMALL | {"invalid_action": "advance", "invalid_penalty": 0.25}
    env, twin = gym.make(env_id, **kw), gym.make(env_id, **kw)
    env.reset(seed=1)
    twin.reset(seed=1)
    seen_masked_advance = False
    for _ in range(40):
        mask = env.unwrapped.action_masks()
        invalid = int(np.flatnonzero(~mask)[0]) if (~mask).any() else len(mask)  # out of range is invalid too
        if env_id.startswith("loangym/Ordering"):
            advance = len(mask) - 1
            expected = advance if mask[advance] else int(np.flatnonzero(mask)[0])
            seen_masked_advance |= not mask[advance]
        else:
            expected = int(np.flatnonzero(mask)[0])  # the first valid server
        obs, reward, term, trunc, info = env.step(invalid)
        obs2, reward2, term2, trunc2, info2 = twin.step(expected)
        assert info["invalid_action"] and not info2["invalid_action"]
        assert np.array_equal(obs, obs2) and (term, trunc) == (term2, trunc2)
        assert reward == pytest.approx(reward2 - 0.25, abs=1e-12)
        if term or trunc:
            break
    if env_id.startswith("loangym/Ordering"):
        assert seen_masked_advance  # the first decision: an idle cluster, a job that fits
    strict = gym.make(env_id, **SMALL)
    strict.reset(seed=1)
    mask = strict.unwrapped.action_masks()
    with pytest.raises(InvalidAction, match="is not allowed now"):
        strict.step(int(np.flatnonzero(~mask)[0]) if (~mask).any() else len(mask))


def test_bad_invalid_action_options_are_refused():
    with pytest.raises(ValueError, match="invalid_action must be one of raise, advance, got 'skip'"):
        gym.make("loangym/Ordering-v1", invalid_action="skip", **SMALL)
    with pytest.raises(ValueError, match="invalid_penalty must be a finite number >= 0"):
        gym.make("loangym/Ordering-v1", invalid_action="advance", invalid_penalty=-1.0, **SMALL)


def test_a_copy_with_the_fallback_goes_on_exactly():
    env = gym.make("loangym/Ordering-v1", invalid_action="advance", **SMALL).unwrapped
    env.reset(seed=2)
    env.expert_action("sjf")  # an expert's walk: the copy replays the episode
    for _ in range(5):
        env.step(0 if not env.action_masks()[0] else env.slots)
    other = copy.deepcopy(env)
    for _ in range(10):
        a = env.slots - 1  # often outside the mask
        o1, r1, *_ = env.step(a)
        o2, r2, *_ = other.step(a)
        assert np.array_equal(o1, o2) and r1 == r2


def test_always_advance_never_stalls_the_cluster():
    """The idling trap at its worst: a policy that always says "advance" still finishes every job,
    because an idle cluster with a job that fits masks "advance" (and the fallback starts one)."""
    env = gym.make("loangym/Ordering-v1", invalid_action="advance", **SMALL)
    env.reset(seed=0)
    advance = env.unwrapped.slots
    while True:
        _, _, term, trunc, info = env.step(advance)
        if term or trunc:
            break
    assert term and not trunc and info["metrics"]["jobs_unfinished"] == 0


@pytest.mark.parametrize("algo", ["PPO", "DQN"])
def test_sb3_without_masks_trains_a_few_thousand_steps(algo):
    import stable_baselines3 as sb3
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env("loangym/Ordering-v1", n_envs=2, seed=0, env_kwargs=SMALL | {"invalid_action": "advance"})
    kw = {"n_steps": 256, "batch_size": 64} if algo == "PPO" else {"learning_starts": 256, "buffer_size": 5_000}
    model = getattr(sb3, algo)("MlpPolicy", venv, seed=0, device="cpu", policy_kwargs={"net_arch": [32]}, **kw)
    model.learn(3_000)
    assert model.num_timesteps >= 3_000
    env = gym.make("loangym/Ordering-v1", **SMALL, invalid_action="advance")
    obs, _ = env.reset(seed=5)
    while True:  # deterministic, no mask: the fallback and the idling guard keep it going
        action, _ = model.predict(obs, deterministic=True)
        obs, _, term, trunc, info = env.step(action)
        if term or trunc:
            break
    assert info["metrics"]["jobs_finished"] == info["metrics"]["jobs_total"] == 30


def test_the_dual_env_renders_the_same_picture():
    from envs.dual import DualEnv

    with pytest.raises(TypeError, match="render_mode 'rgb_array' is not supported"):
        DualEnv(render_mode="rgb_array", **SMALL)
    env = DualEnv(render_mode="ansi", **SMALL)
    assert env.metadata["render_modes"] == ["ansi"]
    env.reset(seed=3)
    single = gym.make("loangym/Ordering-v1", render_mode="ansi", **SMALL)
    single.reset(options={"scenario_seed": env.core.seed})
    assert env.render() == single.render() and env.render().startswith("t = ")
    assert DualEnv(**SMALL).render() is None


class _PrefersAdvance:
    """A deterministic policy caught in the idling trap: it takes the highest action its mask
    allows ("advance" wherever that is allowed)."""

    def __init__(self) -> None:
        self.calls = 0

    def predict(self, obs, deterministic=True, action_masks=None):
        assert deterministic and action_masks is not None  # evaluation passes the mask
        self.calls += 1
        return np.int64(np.flatnonzero(action_masks)[-1]), None


def test_evaluation_of_agents_is_guarded_by_the_mask():
    """evaluate.py and train.py play agents through ``agents.partners.play_episode``, which passes
    the mask: a policy that advances wherever it may still finishes every job."""
    from agents.partners import play_episode
    from envs.core import CoreConfig

    model = _PrefersAdvance()
    core = play_episode(CoreConfig.from_kwargs(**SMALL), 0, model, None, slots=32)
    assert model.calls > 0 and core.metrics["jobs_unfinished"] == 0
