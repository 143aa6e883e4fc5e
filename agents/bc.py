"""Behaviour cloning: a warm start for a MaskablePPO policy from expert demonstrations.

A short masked loop over the policy's own ``evaluate_actions(obs, actions, action_masks=...)``:
minimise the negative log-likelihood of the expert's actions under the masked distribution, and
fit the value head to the demonstrations' discounted returns (so PPO starts with a critic that
matches the actor). Episodes, not steps, are split into training and held-out sets, and the
held-out action accuracy (masked argmax == expert action) is reported.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import torch as th
from sb3_contrib import MaskablePPO

from agents.dataset import Demos

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BCConfig:
    """:param epochs: passes over the training episodes.
    :param batch_size: steps per gradient step.
    :param learning_rate: Adam's step size (a fresh optimiser; the policy's own is untouched).
    :param holdout: share of episodes held out (at least one, if there are two or more).
    :param value_coef: weight of the value regression.
    :param seed: shuffling seed."""

    epochs: int = 15
    batch_size: int = 256
    learning_rate: float = 1e-3
    holdout: float = 0.1
    value_coef: float = 0.5
    seed: int = 0


@dataclass(frozen=True)
class BCReport:
    train_steps: int
    heldout_steps: int
    final_loss: float
    heldout_accuracy: float
    heldout_nll: float


def discounted_returns(rewards: np.ndarray, starts: np.ndarray, gamma: float) -> np.ndarray:
    """Reward-to-go within each episode (an episode ends where the next one starts)."""
    out = np.zeros(len(rewards), dtype=np.float64)
    acc = 0.0
    for i in range(len(rewards) - 1, -1, -1):
        if i + 1 < len(rewards) and starts[i + 1]:
            acc = 0.0
        acc = float(rewards[i]) + gamma * acc
        out[i] = acc
    return out.astype(np.float32)


def split_episodes(demos: Demos, holdout: float) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks (train, held-out) over steps: the last episodes are held out."""
    ids = np.unique(demos.episode_ids)
    n_out = max(1, math.ceil(len(ids) * holdout)) if len(ids) > 1 and holdout > 0 else 0
    held = np.isin(demos.episode_ids, ids[len(ids) - n_out :]) if n_out else np.zeros(len(demos), dtype=bool)
    return ~held, held


def behaviour_clone(model: MaskablePPO, demos: Demos, config: BCConfig | None = None) -> BCReport:
    """Fit ``model.policy`` to ``demos`` in place; report the held-out accuracy."""
    c = config or BCConfig()
    policy = model.policy
    device = policy.device
    returns = discounted_returns(demos.rewards, demos.episode_starts, model.gamma)
    train, held = split_episodes(demos, c.holdout)
    tensors = {
        "obs": th.as_tensor(demos.obs, device=device),
        "actions": th.as_tensor(demos.actions, device=device),
        "masks": th.as_tensor(demos.action_masks, device=device),
        "returns": th.as_tensor(returns, device=device),
    }
    idx = np.flatnonzero(train)
    optimizer = th.optim.Adam(policy.parameters(), lr=c.learning_rate)
    rng = np.random.default_rng(c.seed)
    policy.set_training_mode(True)
    loss_value = float("nan")
    for epoch in range(c.epochs):
        order = rng.permutation(idx)
        total, count = 0.0, 0
        for start in range(0, len(order), c.batch_size):
            b = th.as_tensor(order[start : start + c.batch_size], device=device)
            values, log_prob, _ = policy.evaluate_actions(
                tensors["obs"][b], tensors["actions"][b], action_masks=tensors["masks"][b]
            )
            loss = -log_prob.mean() + c.value_coef * th.nn.functional.mse_loss(values.flatten(), tensors["returns"][b])
            optimizer.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(policy.parameters(), model.max_grad_norm)
            optimizer.step()
            total += loss.item() * len(b)
            count += len(b)
        loss_value = total / max(1, count)
        log.info("bc epoch %d: loss %.4f", epoch + 1, loss_value)
    policy.set_training_mode(False)
    accuracy, nll = evaluate(model, demos, held)
    return BCReport(int(train.sum()), int(held.sum()), loss_value, accuracy, nll)


@th.no_grad()
def evaluate(model: MaskablePPO, demos: Demos, rows: np.ndarray) -> tuple[float, float]:
    """(accuracy of the masked argmax, mean negative log-likelihood) on the selected steps."""
    if not rows.any():
        return float("nan"), float("nan")
    policy = model.policy
    obs = th.as_tensor(demos.obs[rows], device=policy.device)
    actions = th.as_tensor(demos.actions[rows], device=policy.device)
    masks = demos.action_masks[rows]
    dist = policy.get_distribution(obs, action_masks=masks)
    predicted = dist.mode()
    _, log_prob, _ = policy.evaluate_actions(obs, actions, action_masks=th.as_tensor(masks, device=policy.device))
    return float((predicted == actions).float().mean()), float(-log_prob.mean())
