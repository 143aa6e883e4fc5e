"""Agents: permutation-equivariant networks, behaviour cloning, and train.py end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from sb3_contrib import MaskablePPO

import envs  # noqa: F401
from agents.bc import BCConfig, behaviour_clone, discounted_returns, split_episodes
from agents.dataset import RecordConfig, record
from agents.networks import SlotPolicy, ordering_policy_kwargs, placement_policy_kwargs
from envs.core import Components
from envs.obs import JOB, SERVER

th.set_num_threads(1)
ROOT = Path(__file__).resolve().parent.parent
SMALL = {"workload.synthetic.num_jobs": "40"}


def _model(env_id: str, activation: str = "tanh", **kw) -> tuple[MaskablePPO, gym.Env]:
    env = gym.make(env_id, overrides=SMALL, **kw)
    if env_id.endswith("Ordering-v1"):
        pk = ordering_policy_kwargs(32, activation=activation)
    else:
        pk = placement_policy_kwargs(env.unwrapped.num_servers, activation=activation)
    return MaskablePPO(SlotPolicy, env, policy_kwargs=pk, seed=0, device="cpu"), env


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize(
    "env_id, items, item_dim", [("loangym/Ordering-v1", 32, len(JOB)), ("loangym/Placement-v1", None, len(SERVER))]
)
def test_permuting_items_permutes_logits_and_keeps_the_value(env_id, items, item_dim, activation):
    model, env = _model(env_id, activation)
    n = items or env.unwrapped.num_servers
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(1)
    obs = obs.copy()
    obs[: n * item_dim] = rng.uniform(0, 1, n * item_dim)  # distinct items
    obs[: n * item_dim].reshape(n, item_dim)[:, 0] = 1.0  # all present
    perm = rng.permutation(n)
    moved = obs.copy()
    moved[: n * item_dim] = obs[: n * item_dim].reshape(n, item_dim)[perm].ravel()
    pol = model.policy
    with th.no_grad():
        a = pol.mlp_extractor.forward_actor(th.as_tensor(obs[None]))
        b = pol.mlp_extractor.forward_actor(th.as_tensor(moved[None]))
        va, vb = pol.predict_values(th.as_tensor(obs[None])), pol.predict_values(th.as_tensor(moved[None]))
    th.testing.assert_close(b[0, :n], a[0, :n][perm], rtol=1e-5, atol=1e-6)
    th.testing.assert_close(b[0, n:], a[0, n:], rtol=1e-5, atol=1e-6)  # "advance" for the ordering agent
    th.testing.assert_close(va, vb, rtol=1e-5, atol=1e-6)
    assert not th.allclose(a[0, :n], a[0, :n][perm])  # the items really differ


def test_a_policy_saved_without_an_activation_loads_with_tanh():
    """Checkpoints from before the ``activation`` setting were trained with tanh."""
    env = gym.make("loangym/Ordering-v1", overrides=SMALL)
    kw = ordering_policy_kwargs(32)
    del kw["activation"]
    acts = {type(m) for m in MaskablePPO(SlotPolicy, env, policy_kwargs=kw, device="cpu").policy.modules()}
    assert th.nn.Tanh in acts and th.nn.ReLU not in acts
    acts = {type(m) for m in _model("loangym/Ordering-v1", "relu")[0].policy.modules()}
    assert th.nn.ReLU in acts and th.nn.Tanh not in acts


def test_a_run_folder_without_an_activation_resumes_with_tanh(tmp_path):
    from agents.rundir import load_config

    (tmp_path / "config.yaml").write_text("seed: 3\n", encoding="utf-8")
    assert load_config(tmp_path).activation == "tanh" and load_config(tmp_path).seed == 3
    (tmp_path / "config.yaml").write_text("activation: relu\n", encoding="utf-8")
    assert load_config(tmp_path).activation == "relu"


def test_discounted_returns_restart_at_every_episode():
    r = np.array([1.0, 1.0, 1.0, 2.0, 2.0], dtype=np.float32)
    starts = np.array([True, False, False, True, False])
    np.testing.assert_allclose(discounted_returns(r, starts, 0.5), [1.75, 1.5, 1.0, 3.0, 2.0])


def test_behaviour_cloning_reaches_90_percent_held_out_accuracy_on_default():
    """The SJF ordering expert inside the default env (Aryl's components): the cloned policy's
    masked argmax agrees with the expert on >= 90% of held-out episodes' steps."""
    demos = record(
        RecordConfig(expert="sjf", episodes=8, seed=50_000, components=Components("aryl", "aryl", "aryl", "aryl"))
    )
    env = gym.make("loangym/Ordering-v1")
    model = MaskablePPO(SlotPolicy, env, policy_kwargs=ordering_policy_kwargs(32), seed=0, device="cpu")
    before = np.mean(demos.actions == demos.action_masks.shape[1] - 1)  # share of "advance"
    report = behaviour_clone(model, demos, BCConfig(epochs=25, seed=0))
    train, held = split_episodes(demos, 0.1)
    assert held.sum() == report.heldout_steps > 100 and not (train & held).any()
    assert report.heldout_accuracy >= 0.90, report
    assert report.heldout_accuracy > max(before, 1 - before)  # better than always (not) advancing


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_masked_paths_equal_sb3_contribs_bit_for_bit(activation):
    """SlotPolicy's own masked forward and evaluate_actions give exactly what sb3-contrib's
    generic ones give: actions drawn from the same seed, values, log-probabilities, entropies and
    every parameter's gradient."""
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy as Generic

    model, env = _model("loangym/Ordering-v1", activation)
    pol = model.policy
    obs, _ = env.reset(seed=0)
    g = th.Generator().manual_seed(0)
    batch = th.as_tensor(obs).repeat(64, 1) + 0.3 * th.rand(64, obs.shape[0], generator=g)
    masks = th.rand(64, env.action_space.n, generator=g) > 0.5
    masks[:, -1] = True  # "advance" is always valid
    actions = th.tensor([float(np.flatnonzero(m)[0]) for m in masks.numpy()])
    assert (masks.sum(1) > 1).all()  # real choices, not one valid action each
    drawn, fitted = [], []
    for forward, evaluate in (
        (pol.forward, pol.evaluate_actions),
        (lambda *a, **k: Generic.forward(pol, *a, **k), lambda *a, **k: Generic.evaluate_actions(pol, *a, **k)),
    ):
        th.manual_seed(3)
        with th.no_grad():
            drawn.append(forward(batch, action_masks=masks.numpy()))
        pol.optimizer.zero_grad()
        values, log_prob, entropy = evaluate(batch, actions, action_masks=masks.float())
        (values.sum() + log_prob.mean() - 0.01 * entropy.mean()).backward()
        fitted.append([values, log_prob, entropy, *(p.grad for p in pol.parameters())])
    assert len(set(drawn[0][0].tolist())) > 1  # the draws really vary
    for ours, theirs in zip(drawn[0] + tuple(fitted[0]), drawn[1] + tuple(fitted[1]), strict=True):
        assert th.equal(ours, theirs)


def _every_row(scorer, x: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
    """The slot scorer's logits and value with every row encoded and scored, absent ones too (its
    functions written out directly)."""
    b, n, d = x.shape[0], scorer.n_items, scorer.item_dim
    items = x[:, : n * d].reshape(b, n, d)
    codes = scorer.item(items)
    present = (items[..., scorer.present_index] > 0.5).unsqueeze(-1).to(codes.dtype)
    count = present.sum(dim=1)
    mean = (codes * present).sum(dim=1) / count.clamp(min=1.0)
    top = th.where(count > 0, (codes * present - (1.0 - present) * 1e4).max(dim=1).values, 0.0)
    summary = th.cat([mean, top, scorer.ctx(x[:, n * d :])], dim=-1)
    logits = scorer.score_out(scorer.score_item(codes) + scorer.score_summary(summary).unsqueeze(1)).squeeze(-1)
    return th.cat([logits, scorer.extra_head(summary)], dim=-1), scorer.value(summary)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_the_slot_scorer_encodes_only_present_items_and_scores_as_if_it_encoded_all(activation):
    """Logits (absent slots' included), value and gradients as with every row encoded, to float
    rounding; the item network sees only the present rows and one all-zero row."""
    model, env = _model("loangym/Ordering-v1", activation)
    scorer = model.policy.mlp_extractor
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    batch = []
    for _ in range(40):
        batch.append(obs)
        obs, _, done, cut, _ = env.step(int(rng.choice(np.flatnonzero(env.unwrapped.action_masks()))))
        if done or cut:
            obs, _ = env.reset()
    empty = batch[0].copy()
    empty[: 32 * len(JOB)] = 0.0  # no job waiting
    x = th.as_tensor(np.array([*batch, empty]))
    present = x[:, : 32 * len(JOB)].reshape(len(x), 32, len(JOB))[..., JOB.col["present"]] > 0.5
    assert 0 < present.sum() < present.numel() / 4  # a few slots hold jobs, as in training
    seen = []
    hook = scorer.item.register_forward_hook(lambda _m, inputs, _out: seen.append(inputs[0].shape[0]))
    logits, value = scorer(x)
    hook.remove()
    assert seen == [int(present.sum()) + 1]
    grads = th.autograd.grad((logits.square().sum() + value.sum()), list(scorer.parameters()))
    want_logits, want_value = _every_row(scorer, x)
    want = th.autograd.grad((want_logits.square().sum() + want_value.sum()), list(scorer.parameters()))
    th.testing.assert_close(logits, want_logits, rtol=1e-5, atol=1e-6)
    th.testing.assert_close(value, want_value, rtol=1e-5, atol=1e-6)
    for ours, theirs in zip(grads, want, strict=True):
        th.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    th.testing.assert_close(logits[-1, :32], logits[-1, :1].expand(32))  # the empty observation: one absent logit


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    cmd = [
        sys.executable,
        "train.py",
        "--total-steps",
        "400",
        "--rounds",
        "1",
        "--n-envs",
        "2",
        "--set",
        "demo_episodes=2",
        "--set",
        "bc_epochs=1",
        "--set",
        "eval_seeds=100000",
        "--set",
        "n_steps=32",
        "--set",
        "batch_size=64",
        "--set",
        "baselines=fifo",
        "--set",
        "workload.synthetic.num_jobs=30",
        "--out",
        str(out),
        "--demos",
        str(out / "demos"),
    ]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    (run,) = [d for d in out.iterdir() if d.name.startswith("default__dual__0__")]
    return run


def _scalars(tb_dir: Path) -> dict[str, list]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb_dir))
    acc.Reload()
    return {tag: acc.Scalars(tag) for tag in acc.Tags()["scalars"]}


def test_train_py_writes_a_complete_run_folder(tiny_run):
    for name in ("config.yaml", "command.txt", "commit.txt", "layout.json", "state.json"):
        assert (tiny_run / name).is_file(), name
    for agent in ("ordering", "placement"):
        for kind in ("latest", "best"):
            assert (tiny_run / "checkpoints" / f"{agent}_{kind}.zip").is_file()
    state = json.loads((tiny_run / "state.json").read_text())
    assert state["steps"] >= 400 and state["evals"]
    ordering = _scalars(tiny_run / "tb" / "ordering")
    for tag in (
        "rollout/ep_rew_mean",
        "train/loss",
        "time/fps",
        "eval/avg_jct_s/agent",
        "eval/avg_jct_s/fifo",
        "eval/avg_jct_s/sjf-seat",
        "bc/ordering_heldout_accuracy",
    ):
        assert tag in ordering, (tag, sorted(ordering))
    assert any(t.startswith("sched/") for t in ordering)
    assert "train/loss" in _scalars(tiny_run / "tb" / "placement")


def test_ctrl_c_saves_a_checkpoint_and_resume_continues_the_step_count(tmp_path):
    import signal
    import time

    out = tmp_path / "runs"
    cmd = [
        sys.executable,
        "train.py",
        "--total-steps",
        "100000",
        "--rounds",
        "1",
        "--n-envs",
        "2",
        "--no-bc",
        "--set",
        "eval_seeds=100000",
        "--set",
        "n_steps=32",
        "--set",
        "batch_size=64",
        "--set",
        "baselines=fifo",
        "--set",
        "eval_every=1000000",
        "--set",
        "workload.synthetic.num_jobs=30",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and not list(out.glob("*/checkpoints/ordering_latest.zip")):
        time.sleep(0.5)
    time.sleep(8)  # into the training proper
    proc.send_signal(signal.SIGINT)
    _stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr[-2000:]
    (run,) = list(out.iterdir())
    before = json.loads((run / "state.json").read_text())
    assert 0 < before["steps"] < 100000 and before["in_phase"] == before["steps"]
    config = (run / "config.yaml").read_text().replace("total_steps: 100000", f"total_steps: {before['steps'] + 200}")
    (run / "config.yaml").write_text(config)
    p = subprocess.run(
        [sys.executable, "train.py", "--resume", str(run)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, p.stderr[-2000:]
    after = json.loads((run / "state.json").read_text())
    assert after["steps"] >= before["steps"] + 100
    steps = [e.step for e in _scalars(run / "tb" / "ordering")["eval/avg_jct_s/agent"]]
    assert steps == sorted(steps) and steps[-1] == after["steps"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--scenario", "nope"], "unknown scenario 'nope'"),
        (["--set", "learning_rat=1"], "unknown training setting 'learning_rat'"),
        (["--set", "activation=sigmoid"], "--set activation must be one of tanh, relu, got 'sigmoid'"),
        (["--experts", "tiresias"], "policy 'tiresias' is not built from"),
        (["--resume", "/nonexistent/run"], "no such run folder"),
        (["--trace", "/nonexistent.csv"], "nonexistent.csv"),
    ],
)
def test_train_py_bad_input_exits_2_with_one_sentence(args, message, tmp_path):
    p = subprocess.run(
        [sys.executable, "train.py", *args, "--out", str(tmp_path / "runs")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2
    assert message in p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    assert not (tmp_path / "runs").exists()
