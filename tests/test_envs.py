"""The RL adapters: API conformance, determinism, masks, and experts that reproduce their heuristic."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs
from envs.base import InvalidAction
from envs.dual import env as dual_env
from envs.obs import SERVER
from envs.ordering import OrderingEnv
from envs.sim import scenarios
from envs.sim.config import ConfigError
from envs.sim.metrics import TIMING_KEYS, summarize
from envs.sim.policy import ComposedScheduler
from heuristics import registry

SMALL = {"workload.synthetic.num_jobs": "40", "workload.num_jobs": "40"}
SCENARIOS = scenarios.names()


def small(scenario: str) -> dict[str, str]:
    """Overrides that keep an episode short in every scenario."""
    fields = scenarios.get(scenario).workload
    out = {"workload.num_jobs": "40"}
    if not fields.trace:
        out["workload.synthetic.num_jobs"] = "40"
    return out


def make(env_id: str, scenario: str, **kw):
    return gym.make(env_id, scenario=scenario, overrides=small(scenario), **kw)


COMPONENT_POLICIES = [n for n in registry.names() if isinstance(registry.make(n), ComposedScheduler)]


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_gymnasium_and_sb3_env_checkers_pass(env_id, scenario):
    env = make(env_id, scenario)
    gym_check_env(env.unwrapped, skip_render_check=True)
    sb3_check_env(env.unwrapped, warn=True)


def test_pettingzoo_api_test_passes():
    from pettingzoo.test import api_test

    api_test(dual_env(overrides=SMALL), num_cycles=500, verbose_progress=False)


def _rollout(env, seed: int, steps: int = 400):
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    trace = [(obs.copy(), None, None, None, None)]
    for _ in range(steps):
        a = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, r, te, tr, info = env.step(a)
        trace.append((obs.copy(), r, te, tr, {k: v for k, v in info.items() if k != "metrics"}))
        if te or tr:
            break
    return trace, info


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_same_seed_same_actions_identical_rollouts(env_id):
    a, ia = _rollout(make(env_id, "default"), seed=7)
    b, ib = _rollout(make(env_id, "default"), seed=7)
    assert len(a) == len(b)
    for (oa, ra, ta, tra, fa), (ob, rb, tb, trb, fb) in zip(a, b, strict=True):
        np.testing.assert_array_equal(oa, ob)
        assert (ra, ta, tra) == (rb, tb, trb)
        if fa is not None:
            assert fa.keys() == fb.keys()
            for k in fa:
                np.testing.assert_array_equal(fa[k], fb[k])
    ma = {k: v for k, v in (ia.get("metrics") or {}).items() if k not in TIMING_KEYS}
    mb = {k: v for k, v in (ib.get("metrics") or {}).items() if k not in TIMING_KEYS}
    assert ma == mb
    c, _ = _rollout(make(env_id, "default"), seed=8)
    assert any(not np.array_equal(x[0], y[0]) for x, y in zip(a, c, strict=False))


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_random_masked_policy_never_makes_an_invalid_decision(env_id, scenario):
    """Random masked actions through 5 whole episodes of 120 jobs, each reset to a new seed (60 to
    236 steps an episode)."""
    env = gym.make(env_id, scenario=scenario, overrides={"workload.num_jobs": "120"}).unwrapped
    rng = np.random.default_rng(0)
    steps, episodes = 0, 0
    obs, info = env.reset(seed=0)
    while episodes < 5:
        mask = env.action_masks()
        assert mask.any() and np.array_equal(mask, info["action_mask"])
        assert env.observation_space.contains(obs)
        obs, _, te, tr, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        steps += 1
        if te or tr:
            assert "metrics" in info
            episodes += 1
            obs, info = env.reset()
    assert steps >= 5 * 50  # episodes that end at once would check nothing


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_an_action_outside_the_mask_raises(env_id):
    env = make(env_id, "default").unwrapped
    env.reset(seed=0)
    bad = int(np.flatnonzero(~env.action_masks())[0])
    with pytest.raises(InvalidAction, match=f"action {bad} is not allowed now"):
        env.step(bad)


def test_an_agent_that_always_waits_cannot_idle_the_cluster_forever():
    """The "advance" action is masked while nothing runs and a job could start: an agent that advances
    whenever it may still finishes every job (it used to idle until the stall guard cut the
    episode, and its average JCT then counted only the jobs that had finished)."""
    env = make("loangym/Ordering-v1", "default").unwrapped
    _, info = env.reset(seed=0)
    assert not env.core.view.running and not info["action_mask"][-1]
    te = tr = False
    while not (te or tr):
        _, _, te, tr, info = env.step(int(np.flatnonzero(info["action_mask"])[-1]))
    assert te and not tr and info["metrics"]["jobs_unfinished"] == 0


def test_jct_reward_sums_to_minus_mean_jct_in_hours():
    env = make("loangym/Ordering-v1", "default").unwrapped
    env.reset(seed=3)
    total, done = 0.0, False
    while not done:
        _, r, te, tr, info = env.step(int(np.flatnonzero(env.action_masks())[0]))  # the oldest job that fits
        total += r
        done = te or tr
    assert te and info["metrics"]["jobs_unfinished"] == 0
    m = info["metrics"]
    assert total == pytest.approx(-m["avg_jct_s"] / 3600.0, rel=1e-9)


def _oldest_first_return(env) -> tuple[float, dict]:
    total, done = 0.0, False
    while not done:
        _, r, te, tr, info = env.step(int(np.flatnonzero(env.action_masks())[0]))  # the oldest job that fits
        total += r
        done = te or tr
    return total, info["metrics"]


@pytest.mark.parametrize("reward", ["jct", "slowdown", "fee", "deadline"])
def test_a_reward_reference_makes_the_return_the_gap_to_its_run(reward):
    """With ``reward_reference``, an episode's return is minus the gap between the agent's figure
    and the reference heuristic's own run of the same episode: the return without it, less the
    reference's own return (its expert with its components and room for every job reproduces
    its run). The agent here starts the oldest job that fits, not the reference's order."""
    ref, seed = "sjf", 7
    returns = []
    for reference in (None, ref):
        env = make("loangym/Ordering-v1", "default", reward=reward, reward_reference=reference).unwrapped
        env.reset(options={"scenario_seed": seed})
        returns.append(_oldest_first_return(env))
    (plain, m), (relative, _) = returns
    seats = dict(placement=ref, scaling=ref, reclaim=ref, preemption=ref, max_jobs=400)
    env = make("loangym/Ordering-v1", "default", reward=reward, **seats).unwrapped
    env.reset(options={"scenario_seed": seed})
    own, done = 0.0, False
    while not done:
        _, r, te, tr, _ = env.step(env.expert_action(ref))
        own += r
        done = te or tr
    assert relative == pytest.approx(plain - own, rel=1e-9, abs=1e-12)
    if reward == "jct":
        alone = summarize(scenarios.simulate(scenarios.get("default", small("default")), registry.make(ref), seed))
        assert relative == pytest.approx(-(m["avg_jct_s"] - alone["avg_jct_s"]) / 3600.0, rel=1e-9)
        assert relative != 0.0


def test_a_reward_reference_must_be_a_heuristic_that_acts_at_the_information_level():
    with pytest.raises(ConfigError, match="unknown policy"):
        make("loangym/Ordering-v1", "default", reward_reference="nope")
    with pytest.raises(ConfigError, match="sjf"):
        gym.make(
            "loangym/Ordering-v1",
            scenario="default",
            overrides={"information.level": "none"},
            **dict.fromkeys(("placement", "scaling", "reclaim", "preemption"), "qssf"),
            reward_reference="sjf",
        )


@pytest.mark.parametrize("name", COMPONENT_POLICIES)
def test_ordering_expert_reproduces_its_heuristic(name):
    """Every component heuristic as the ordering expert with its own components equals its own
    evaluate.py run (same seed), with enough slots that no waiting job is hidden."""
    kw = dict(placement=name, scaling=name, reclaim=name, preemption=name, max_jobs=400)
    env = gym.make("loangym/Ordering-v1", scenario="default", **kw).unwrapped
    env.reset(options={"scenario_seed": 5})
    done = False
    while not done:
        _, _, te, tr, info = env.step(env.expert_action(name))
        done = te or tr
    direct = summarize(scenarios.simulate(scenarios.get("default"), registry.make(name), 5))
    for k, v in direct.items():
        if k not in TIMING_KEYS:
            assert info["metrics"][k] == v, k


@pytest.mark.parametrize("name", COMPONENT_POLICIES)
def test_placement_expert_reproduces_its_heuristic(name):
    kw = dict(ordering=name, placement=name, scaling=name, reclaim=name, preemption=name)
    env = gym.make("loangym/Placement-v1", scenario="default", **kw).unwrapped
    env.reset(options={"scenario_seed": 5})
    done = False
    while not done:
        _, _, te, tr, info = env.step(env.expert_action())
        done = te or tr
    direct = summarize(scenarios.simulate(scenarios.get("default"), registry.make(name), 5))
    for k, v in direct.items():
        if k not in TIMING_KEYS:
            assert info["metrics"][k] == v, k


def test_speed_estimator_learns_the_machines_speeds_in_the_cloud_scenario():
    env = gym.make(
        "loangym/Placement-v1", scenario="cloud", ordering="sjf", placement="sjf", scaling="sjf", reclaim="sjf"
    ).unwrapped
    env.reset(options={"scenario_seed": 1})
    done = False
    while not done:
        _, _, te, tr, _ = env.step(env.expert_action())
        done = te or tr
    est = env.encoder.speeds
    mean, std = est.estimate()
    truth = np.log([s.speed_factor for s in env.core.engine.cluster.servers])
    seen = est.count > 0
    assert seen.sum() >= 10
    assert np.corrcoef(mean[seen], truth[seen])[0, 1] > 0.8
    assert (std[seen] < np.sqrt(est.GROUP_VAR + est.MACHINE_VAR)).all()


def test_placement_observation_says_where_the_rest_of_the_gang_fits():
    """fits_left and spare read each server's free GPUs against the workers still to place; with
    them best fit (Aryl's placement, the expert) is visible per server: it picks, within its
    preferred pool, a server that holds the rest with the least spare."""
    env = gym.make("loangym/Placement-v1", scenario="default", ordering="sjf", overrides=small("default")).unwrapped
    obs, info = env.reset(options={"scenario_seed": 3})
    g = len(SERVER)
    fits, spare, pool = (SERVER.col[f] for f in ("fits_left", "spare", "inference"))
    steps = 0
    while True:
        core = env.core
        srv = obs[: env.num_servers * g].reshape(env.num_servers, g)
        free = np.array(core.engine.cluster.free)
        size = np.array([s.num_gpus for s in core.engine.cluster.servers])
        assert np.array_equal(srv[:, fits], (free >= core.left).astype(np.float32))
        assert np.allclose(srv[:, spare], np.clip((free - core.left) / size, -1.0, 1.0))
        expert = env.expert_action()
        rivals = info["action_mask"] & (srv[:, fits] == 1.0) & (srv[:, pool] == srv[expert, pool])
        assert srv[expert, fits] == 1.0 and srv[expert, spare] == srv[rivals, spare].min()
        steps += 1
        obs, _, te, tr, info = env.step(expert)
        if te or tr:
            break
    assert steps >= 30


# ---------------------------------------------------------------------------------------------- copies
def _same_step(a: tuple, b: tuple) -> None:
    """Two step() (or reset()) results are identical, the info's arrays and metrics included."""
    (oa, *ra, ia), (ob, *rb, ib) = a, b
    np.testing.assert_array_equal(oa, ob)
    assert ra == rb
    assert ia.keys() == ib.keys()
    np.testing.assert_array_equal(ia["action_mask"], ib["action_mask"])
    ma = {k: v for k, v in (ia.get("metrics") or {}).items() if k not in TIMING_KEYS}
    assert ma == {k: v for k, v in (ib.get("metrics") or {}).items() if k not in TIMING_KEYS}


def _episode(env, seed: int, expert: str | None) -> list[int]:
    """The actions of one episode: ``expert``'s action where given and valid (so that its walk
    goes on from one step to the next), else random masked ones."""
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions: list[int] = []
    while True:
        mask = env.action_masks()
        a = env.expert_action(expert) if expert is not None else -1
        actions.append(a if a >= 0 and mask[a] else int(rng.choice(np.flatnonzero(mask))))
        _, _, te, tr, _ = env.step(actions[-1])
        if te or tr:
            return actions


COPIES = {"pickle": lambda e: pickle.loads(pickle.dumps(e)), "deepcopy": copy.deepcopy}


@pytest.mark.parametrize("how", COPIES)
@pytest.mark.parametrize("env_id", envs.ENV_IDS)
@pytest.mark.parametrize("ordering", ["fifo", "mlfs", "aryl"])
def test_a_copy_after_reset_and_mid_episode_continues_bit_identically(env_id, ordering, how):
    """Copies taken after reset and at several points of an episode each step on exactly as the
    original does, to the episode's end. mlfs and aryl rank lazily (their rankings read the
    cluster as jobs start), so the placement env holds a ranking half walked; in the ordering env
    the expert of that name walks one."""
    kw = {"ordering": ordering} if env_id == "loangym/Placement-v1" else {}
    expert = ordering if env_id == "loangym/Ordering-v1" else None
    env = gym.make(env_id, scenario="default", overrides=small("default"), **kw).unwrapped
    actions = _episode(env, 11, expert)
    assert len(actions) >= 10
    for cut in (0, 1, len(actions) // 2, len(actions) - 1):
        first = env.reset(seed=11)
        for a in actions[:cut]:
            if expert is not None:
                env.expert_action(expert)
            env.step(a)
        dup = COPIES[how](env)
        assert dup is not env and dup.core is not env.core
        if cut == 0:
            _same_step(first, (dup._get_obs(), dup._get_info()))
        for a in actions[cut:]:
            if expert is not None:
                assert env.expert_action(expert) == dup.expert_action(expert)
            np.testing.assert_array_equal(env.action_masks(), dup.action_masks())
            _same_step(env.step(a), dup.step(a))
        assert env.core.done and dup.core.done


def test_a_copy_of_the_dual_env_continues_bit_identically():
    env = dual_env(overrides=small("default"))
    env.reset(seed=4)
    rng = np.random.default_rng(0)
    for _ in range(25):
        env.step(int(rng.choice(np.flatnonzero(env.observe(env.agent_selection)["action_mask"]))))
    dup = copy.deepcopy(pickle.loads(pickle.dumps(env)))
    steps = 0
    while not (env.terminations[env.agent_selection] or env.truncations[env.agent_selection]):
        agent = env.agent_selection
        assert dup.agent_selection == agent
        oa, ob = env.observe(agent), dup.observe(agent)
        for k in oa:
            np.testing.assert_array_equal(oa[k], ob[k])
        a = int(rng.choice(np.flatnonzero(oa["action_mask"])))
        env.step(a)
        dup.step(a)
        assert env.rewards == dup.rewards
        steps += 1
    assert steps >= 10 and env.infos == dup.infos


def test_an_env_pickled_before_reset_is_a_working_env():
    env = make("loangym/Placement-v1", "default")
    dup = pickle.loads(pickle.dumps(env))
    _same_step(env.reset(seed=2), dup.reset(seed=2))


def test_a_vector_env_of_spawned_processes_steps_reset_envs():
    """AsyncVectorEnv with the spawn context pickles each env factory; here it closes over an env
    that was reset and stepped (what failed with "cannot pickle 'generator'")."""
    env = make("loangym/Placement-v1", "default")
    env.reset(seed=5)
    env.step(int(np.flatnonzero(env.unwrapped.action_masks())[0]))
    vec = gym.vector.AsyncVectorEnv([lambda: env], context="spawn")
    try:
        vec.reset(seed=5)
        obs, *_ = vec.step(np.array([int(np.flatnonzero(env.unwrapped.action_masks())[0])]))
        assert obs.shape == (1, *env.observation_space.shape)
    finally:
        vec.close()


# ---------------------------------------------------------------------------------------------- actions
BAD_ACTIONS = [0.5, 1.0, True, np.bool_(False), np.float32(1), np.array([1]), np.array(1.0), "1", None]
GOOD_ACTIONS = [int, np.int64, np.int32, np.uint8, lambda a: np.array(a), lambda a: np.array(a, dtype=np.int16)]


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_step_refuses_an_action_that_is_not_an_integer(env_id):
    """Each is refused with a sentence and changes nothing: the next valid step gives what it
    gives in an env that never saw them."""
    env, clean = (make(env_id, "default").unwrapped for _ in range(2))
    env.reset(seed=0)
    clean.reset(seed=0)
    for bad in BAD_ACTIONS:
        with pytest.raises(InvalidAction, match=r"step\(\) takes an integer action .* got "):
            env.step(bad)
    a = int(np.flatnonzero(env.action_masks())[0])
    _same_step(env.step(a), clean.step(a))


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_step_takes_python_and_numpy_integers_alike(env_id):
    runs = []
    for kind in GOOD_ACTIONS:
        env = make(env_id, "default").unwrapped
        env.reset(seed=0)
        steps = []
        for _ in range(5):
            steps.append(env.step(kind(int(np.flatnonzero(env.action_masks())[-1]))))
        runs.append(steps)
    for other in runs[1:]:
        for a, b in zip(runs[0], other, strict=True):
            _same_step(a, b)


def test_the_dual_env_refuses_an_action_that_is_not_an_integer():
    env = dual_env(overrides=small("default"))
    env.reset(seed=0)
    for bad in BAD_ACTIONS:
        with pytest.raises(InvalidAction, match=r"step\(\) takes an integer action"):
            env.step(bad)
    env.step(np.int64(int(np.flatnonzero(env.observe(env.agent_selection)["action_mask"])[0])))


@pytest.mark.parametrize("scenario", ["default", "loaning"])
def test_the_refusals_kept_between_decision_points_are_those_the_placement_makes_now(scenario):
    """A monotone placement's refusals carry over to the next decision point while no room grew
    (``Core._begin_decision_point``): every slot's ``fits`` still equals what the placement says
    when asked afresh, and some refusals were in fact carried over."""
    env = gym.make(
        "loangym/Ordering-v1", scenario=scenario, placement="fifo", scaling="fifo", reclaim="fifo", preemption=None
    ).unwrapped
    core = env.core
    carried = [0]
    begin = core._begin_decision_point

    def counting() -> None:  # the refusals a new decision point starts with
        begin()
        carried[0] += sum(s is None for s in core._fits.values())

    core._begin_decision_point = counting
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    for _ in range(1500):
        placement = core.scheduler.placement
        assert env.fits == [placement.place(core.view, j) is not None for j in env.visible]
        _, _, te, tr, _ = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
        if te or tr:
            env.reset()
    assert carried[0] > 0


def test_both_experts_reproduce_a_placement_that_waits_for_faster_gpus():
    """srsf-eft on cloud holds jobs back for faster GPUs, so a job it refused may start once another
    has started (``policy.reconsiders``): its own loop then walks the ranking again after each
    start, and both seats ask every job again, so the experts still equal the heuristic."""
    direct = summarize(scenarios.simulate(scenarios.get("cloud"), registry.make("srsf-eft"), 5))
    kw = dict.fromkeys(("placement", "scaling", "reclaim", "preemption"), "srsf-eft")
    for env in (
        gym.make("loangym/Ordering-v1", scenario="cloud", max_jobs=400, **kw).unwrapped,
        gym.make("loangym/Placement-v1", scenario="cloud", ordering="srsf-eft", **kw).unwrapped,
    ):
        env.reset(options={"scenario_seed": 5})
        done = False
        while not done:
            action = env.expert_action("srsf-eft") if isinstance(env, OrderingEnv) else env.expert_action()
            _, _, te, tr, info = env.step(action)
            done = te or tr
        for k, v in direct.items():
            if k not in TIMING_KEYS:
                assert info["metrics"][k] == v, k
