"""demos.py and agents/dataset.py: the file format, exact replay, experts equal to their heuristics,
loader errors and CLI errors."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import demos as demos_cli
from agents import dataset as ds
from agents.dataset import DemoError, load_demos, load_merged
from envs.obs import CLUSTER, JOB, OBS_VERSION
from envs.sim import scenarios
from envs.sim.metrics import TIMING_KEYS, summarize
from heuristics import registry

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--set", "workload.synthetic.num_jobs=30"]
K = 40  # job slots: more than the 30 jobs of an episode, so no waiting job is ever hidden
OBS_DIM = K * len(JOB) + len(CLUSTER)  # the ordering env's layout
ARRAY_NAMES = ["obs", "actions", "action_masks", "rewards", "episode_starts", "episode_ids", "expert_ids"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "demos.py"), *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def ordering_run(tmp_path_factory):
    """fifo and aryl in the ordering env, two episodes each (seeds 3, 4), one file per expert."""
    out = tmp_path_factory.mktemp("ordering") / "demos"
    proc = run_cli(
        "--expert", "fifo,aryl", "--episodes", "2", "--seed", "3", "--max-jobs", str(K), *SMALL, "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return out, proc.stdout


@pytest.fixture(scope="module")
def placement_run(tmp_path_factory):
    """aryl and sjf in the placement env, one episode each (seed 5), both in one file."""
    out = tmp_path_factory.mktemp("placement") / "both.npz"
    proc = run_cli(
        "--env", "placement", "--expert", "aryl,sjf", "--episodes", "1", "--seed", "5", *SMALL, "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return out, proc.stdout


def raw(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    """The file as numpy alone sees it."""
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    return arrays, json.loads(str(arrays.pop("meta")))


# ---------------------------------------------------------------------- the file
@pytest.mark.parametrize("expert", ["fifo", "aryl"])
def test_ordering_smoke_file_is_plain_numpy_with_the_documented_layout(ordering_run, expert):
    out, stdout = ordering_run
    assert sorted(p.name for p in out.iterdir()) == ["aryl.npz", "fifo.npz"]
    a, meta = raw(out / f"{expert}.npz")
    assert sorted(a) == sorted(ARRAY_NAMES)
    n = len(a["actions"])
    assert n > 0
    assert a["obs"].dtype == np.float32 and a["obs"].shape == (n, OBS_DIM)
    assert a["actions"].dtype == np.int64
    assert a["action_masks"].dtype == np.bool_ and a["action_masks"].shape == (n, K + 1)
    assert a["rewards"].dtype == np.float32 and a["rewards"].shape == (n,)
    assert a["episode_starts"].dtype == np.bool_ and a["episode_ids"].dtype == np.int64
    assert a["action_masks"][np.arange(n), a["actions"]].all()
    assert (a["expert_ids"] == 0).all()
    # two episodes, in order; each one's first step is marked
    steps = [e["steps"] for e in meta["sources"][0]["episodes"]]
    assert sum(steps) == n and min(steps) > 0
    np.testing.assert_array_equal(a["episode_ids"], np.repeat([0, 1], steps))
    np.testing.assert_array_equal(np.flatnonzero(a["episode_starts"]), [0, steps[0]])

    assert (meta["format"], meta["version"], meta["env_id"]) == ("loangym-demos", 1, "loangym/Ordering-v1")
    assert (meta["obs_version"], meta["obs_dim"], meta["n_actions"]) == (OBS_VERSION, OBS_DIM, K + 1)
    assert meta["experts"] == [expert]
    (src,) = meta["sources"]
    assert src["expert"] == expert and src["scenario"] == "default"
    assert src["env_kwargs"] == {
        "scenario": "default",
        "overrides": {"workload.synthetic.num_jobs": "30"},
        "trace": None,
        "components": {"placement": expert, "scaling": expert, "reclaim": expert, "preemption": expert},
        "reward": "jct",
        "max_jobs": K,
    }
    assert [(e["id"], e["seed"]) for e in src["episodes"]] == [(0, 3), (1, 4)]
    for e, ep_rewards in zip(src["episodes"], np.split(a["rewards"], [steps[0]]), strict=True):
        assert e["episode_return"] == pytest.approx(float(ep_rewards.astype(np.float64).sum()), rel=1e-6)
        assert e["terminated"] is True and not set(TIMING_KEYS) & set(e["metrics"])
    assert src["commit"] and src["command"][:3] == ["demos.py", "--expert", "fifo,aryl"]
    jct = np.mean([e["metrics"]["avg_jct_s"] for e in src["episodes"]])
    assert f"{expert} (ordering): 2 episodes, {n} steps" in stdout
    assert f"mean avg JCT {jct:,.0f} s" in stdout


def test_one_file_for_several_experts_tells_them_apart(placement_run):
    out, stdout = placement_run
    d = load_demos(out)
    assert d.meta.env_id == "loangym/Placement-v1" and d.meta.experts == ("aryl", "sjf")
    steps = [s.episodes[0].steps for s in d.meta.sources]
    np.testing.assert_array_equal(d.expert_ids, np.repeat([0, 1], steps))
    np.testing.assert_array_equal(d.episode_ids, np.repeat([0, 1], steps))
    assert [e.seed for e in d.episodes] == [5, 5]
    kwargs = d.meta.sources[1].env_kwargs
    assert kwargs["ordering"] == "sjf" and kwargs["components"]["placement"] == "sjf"
    assert "aryl (placement): 1 episodes" in stdout and "sjf (placement): 1 episodes" in stdout


def replay(path: Path) -> int:
    """Replay every episode of the file in a fresh env; return the steps compared."""
    d = load_demos(path)
    compared = 0
    for src in d.meta.sources:
        env = gym.make(d.meta.env_id, **src.env_kwargs).unwrapped
        ds.check_env(d, env, str(path))
        for ep in src.episodes:
            rows = np.flatnonzero(d.episode_ids == ep.id)
            obs, info = env.reset(seed=ep.seed, options={"scenario_seed": ep.seed})
            for i, row in enumerate(rows):
                np.testing.assert_array_equal(obs, d.obs[row])
                np.testing.assert_array_equal(info["action_mask"], d.action_masks[row])
                obs, r, te, tr, info = env.step(int(d.actions[row]))
                assert np.float32(r) == d.rewards[row]
                assert (te or tr) == (i == len(rows) - 1)
            assert te == ep.terminated
            compared += len(rows)
    return compared


def test_replaying_the_actions_reproduces_observations_and_rewards(ordering_run, placement_run):
    for path in (ordering_run[0] / "fifo.npz", ordering_run[0] / "aryl.npz", placement_run[0]):
        assert replay(path) == len(load_demos(path))


def test_the_fifo_expert_equals_fifo_simulated_directly(ordering_run):
    d = load_demos(ordering_run[0] / "fifo.npz")
    scenario = scenarios.get("default", {"workload.synthetic.num_jobs": "30"})
    for ep in d.episodes:
        direct = summarize(scenarios.simulate(scenario, registry.make("fifo"), ep.seed))
        assert ep.metrics == {k: v for k, v in direct.items() if k not in TIMING_KEYS}
        # and the jct reward sums to -mean JCT in hours
        jct = direct["avg_jct_s"]
        assert jct is not None and ep.episode_return == pytest.approx(-jct / 3600.0, rel=1e-9)


def test_the_same_command_gives_identical_arrays(ordering_run):
    cfg = ds.RecordConfig(
        expert="fifo", episodes=2, seed=3, max_jobs=K, overrides=(("workload.synthetic.num_jobs", "30"),)
    )
    again = ds.record(cfg)
    saved = load_demos(ordering_run[0] / "fifo.npz")
    for name in ARRAY_NAMES:
        np.testing.assert_array_equal(getattr(again, name), getattr(saved, name), err_msg=name)
    # the meta too, bar how it was asked for (and the commit, which others' edits may make dirty)
    same = dataclasses.replace(saved.meta.sources[0], command=(), commit="")
    assert dataclasses.replace(
        again.meta, sources=(dataclasses.replace(again.meta.sources[0], command=(), commit=""),)
    ) == (dataclasses.replace(saved.meta, sources=(same,)))


# ---------------------------------------------------------------------- loading
def test_the_loader_checks_the_env(ordering_run):
    path = ordering_run[0] / "fifo.npz"
    ok = gym.make("loangym/Ordering-v1", scenario="default", max_jobs=K)
    assert len(load_demos(path, env=ok)) == len(load_demos(path))
    other = gym.make("loangym/Ordering-v1", scenario="default", max_jobs=8)
    small = 8 * len(JOB) + len(CLUSTER)
    with pytest.raises(
        DemoError,
        match=rf"fifo\.npz' does not match the env: obs_dim {OBS_DIM} in the file, {small} in the env; "
        rf"n_actions {K + 1} in the file, 9 in the env\.$",
    ):
        load_demos(path, env=other)
    with pytest.raises(DemoError, match=r"env id 'loangym/Ordering-v1' in the file, 'loangym/Placement-v1' in the env"):
        load_demos(path, env=gym.make("loangym/Placement-v1", scenario="default").unwrapped)


def write_raw(dst: Path, arrays: dict[str, np.ndarray], meta: dict) -> Path:
    entries: dict[str, Any] = {"meta": np.array(json.dumps(meta)), **arrays}
    np.savez_compressed(dst, **entries)
    return dst


def rewrite(src: Path, dst: Path, meta_edit=None, **arrays) -> Path:
    a, meta = raw(src)
    if meta_edit:
        meta_edit(meta)
    return write_raw(dst, a | arrays, meta)


def test_bad_files_raise_one_sentence_naming_the_file(ordering_run, tmp_path):
    good = ordering_run[0] / "fifo.npz"
    junk = tmp_path / "junk.npz"
    junk.write_text("not a zip\n")
    npy = tmp_path / "one.npy"
    np.save(npy, np.zeros(3))
    n = len(load_demos(good))
    cases = {
        tmp_path / "missing.npz": "does not exist",
        junk: "is not a .npz archive",
        npy: "single .npy array",
        rewrite(
            good, tmp_path / "v99.npz", lambda m: m.update(version=99)
        ): "format version 99; this code reads version 1",
        rewrite(good, tmp_path / "other.npz", lambda m: m.update(format="x")): "is not a loangym demo dataset",
        rewrite(good, tmp_path / "short.npz", rewards=np.zeros(n - 1, np.float32)): "differ in length",
        rewrite(good, tmp_path / "f64.npz", obs=np.zeros((n, OBS_DIM))): "array obs is float64",
        rewrite(good, tmp_path / "nomask.npz", action_masks=np.zeros((n, K + 1), bool)): "action is not in its mask",
        rewrite(good, tmp_path / "starts.npz", episode_starts=np.ones(n, bool)): "episode_starts",
    }
    for path, problem in cases.items():
        with pytest.raises(DemoError, match=problem) as err:
            load_demos(path)
        assert f"'{path}'" in str(err.value) and str(err.value).endswith(".")
    missing = tmp_path / "noacts.npz"
    a, meta = raw(good)
    del a["actions"]
    write_raw(missing, a, meta)
    with pytest.raises(DemoError, match=r"noacts\.npz' lacks the array\(s\) actions"):
        load_demos(missing)


def test_merging_keeps_episodes_and_experts_apart(ordering_run, placement_run):
    out = ordering_run[0]
    m = load_merged([out / "fifo.npz", out / "aryl.npz"])
    fifo, aryl = load_demos(out / "fifo.npz"), load_demos(out / "aryl.npz")
    assert len(m) == len(fifo) + len(aryl) and m.meta.experts == ("fifo", "aryl")
    np.testing.assert_array_equal(m.episode_ids, np.concatenate([fifo.episode_ids, aryl.episode_ids + 2]))
    np.testing.assert_array_equal(m.expert_ids, np.repeat([0, 1], [len(fifo), len(aryl)]))
    assert [e.id for e in m.episodes] == [0, 1, 2, 3]
    # a merged dataset is itself a valid file
    path = ds.save_demos(m, out.parent / "merged.npz")
    np.testing.assert_array_equal(load_demos(path).obs, np.concatenate([fifo.obs, aryl.obs]))
    path.unlink()
    with pytest.raises(DemoError, match=r"both\.npz' has env_id 'loangym/Placement-v1'.*cannot be merged"):
        load_merged([out / "fifo.npz", placement_run[0]])


# ---------------------------------------------------------------------- CLI errors
def bad_trace(tmp_path: Path) -> str:
    p = tmp_path / "bad.csv"
    p.write_text("job_id,submit_time_s\n1,0\n")
    return str(p)


BAD = {
    "unknown expert": (["--expert", "nosuch"], "unknown policy 'nosuch'"),
    "not a component heuristic": (["--expert", "tiresias"], "not built from ordering/placement/scaling"),
    "unknown scenario": (["--expert", "fifo", "--scenario", "nosuch"], "unknown scenario 'nosuch'"),
    "set without =": (["--expert", "fifo", "--set", "cluster"], "--set expects key=value"),
    "unknown set key": (["--expert", "fifo", "--set", "cluster.nosuch=1"], "nosuch"),
    "slots in placement": (["--expert", "fifo", "--env", "placement", "--max-jobs", "8"], "--max-jobs"),
    "no episodes": (["--expert", "fifo", "--episodes", "0"], "--episodes must be at least 1"),
    "twice": (["--expert", "fifo,fifo"], "names a heuristic twice"),
    "lookahead over an unknown base": (["--expert", "oracle-lookahead-nosuch"], "unknown policy 'nosuch'"),
    "lookahead in placement": (["--expert", "oracle-lookahead-sjf", "--env", "placement"], "ordering env only"),
}


@pytest.mark.parametrize("case", [*BAD, "bad trace", "unwritable out", "out is a folder"])
def test_bad_input_is_one_sentence_exit_2_and_nothing_written(case, tmp_path, capsys):
    out = tmp_path / "out"
    if case == "bad trace":
        argv, message = ["--expert", "fifo", "--trace", bad_trace(tmp_path)], "bad.csv"
    elif case == "unwritable out":
        (tmp_path / "afile").write_text("x")
        out = tmp_path / "afile" / "sub"
        argv, message = ["--expert", "fifo"], "is not a folder"
    elif case == "out is a folder":
        out = tmp_path / "d.npz"
        out.mkdir()
        argv, message = ["--expert", "fifo"], "it is a folder"
    else:
        argv, message = BAD[case]
    before = sorted(tmp_path.rglob("*"))
    assert demos_cli.main([*argv, *SMALL, "--out", str(out)]) == 2
    text = capsys.readouterr().out
    assert text.startswith("error:") and message in text and text.count("\n") == 1
    assert sorted(tmp_path.rglob("*")) == before


def test_a_bad_input_exits_2_without_a_traceback(tmp_path):
    proc = run_cli("--expert", "sjf,tiresias", *SMALL, "--out", str(tmp_path / "x"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout and "tiresias" in proc.stdout
    assert list(tmp_path.iterdir()) == []


def test_the_lookahead_expert_is_never_worse_than_its_base_and_acts_within_the_mask():
    """``oracle-lookahead-sjf`` tries sjf's own choice among its options, each played on by sjf,
    so its episode is at least as good as sjf's; it deviates from sjf somewhere (else it would
    teach nothing), and every action it takes is one the mask allows."""
    kw = dict(scenario="default", overrides={"workload.synthetic.num_jobs": "30"}, max_jobs=K)
    kw |= dict.fromkeys(("placement", "scaling", "reclaim", "preemption"), "sjf")
    jct, actions = {}, {}
    for expert in ("sjf", "oracle-lookahead-sjf"):
        env = gym.make("loangym/Ordering-v1", **kw).unwrapped
        _, info = env.reset(options={"scenario_seed": 3})
        taken = []
        while "metrics" not in info:
            a = env.expert_action(expert)
            assert info["action_mask"][a]
            taken.append(a)
            _, _, _, _, info = env.step(a)
        jct[expert], actions[expert] = info["metrics"]["avg_jct_s"], taken
    assert jct["oracle-lookahead-sjf"] <= jct["sjf"]
    assert actions["oracle-lookahead-sjf"] != actions["sjf"]
