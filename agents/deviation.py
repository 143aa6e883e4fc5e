"""Deviation agents: a heuristic in the ordering seat that gives way, decision by decision, to the
option a small network predicts to be better (``benchmarks/learnability.py`` fits such networks
to lookahead advantages, ``benchmarks/dagger.py`` on the states its own deviations reach).

At a decision with a choice the options are the base heuristic's own choice, the next ``width``
visible jobs that can start and "advance" where the mask allows it
(:func:`envs.lookahead.ordering_jobs`); each is described by :func:`features`. The network
predicts every option's advantage relative to the base's choice (negative: better), in units of
the margin; the agent takes the best option where it beats the base's choice by more than the
margin, else the base's (:func:`deviation`).

A saved agent is a folder: ``agent.json`` (the base, width, margin, job slots, observation
layout and how it was trained) and ``network.pt`` (the network's weights). ``evaluate.py
--policies dagger:FOLDER`` plays it (``agents.trained``). torch is imported only when a network
is built.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from envs import lookahead
from envs.obs import CLUSTER, JOB, OBS_VERSION
from envs.ordering import OrderingEnv
from envs.sim.config import ConfigError

Policy = Callable[[np.ndarray], int]
"""Which option to take at a decision, from its options' features (0: the base's own choice)."""

Predictor = Callable[[np.ndarray], np.ndarray]
"""An option array's predicted advantages relative to the base's choice (the first option)."""

AGENT_FILE, NETWORK_FILE = "agent.json", "network.pt"
HIDDEN = 64
FEATURES = 2 * len(JOB) + len(CLUSTER) + 1  # per option: its job row, its difference, the cluster, advance


def features(obs: np.ndarray, slots: int, visible: Sequence[int], jobs: Sequence[int | None]) -> np.ndarray:
    """One row per option of ``jobs`` (the base's choice first, None: advance): the option's job
    row, its difference to the base choice's row, the cluster features, whether it is "advance"."""
    n_job = len(JOB)
    rows = obs[: slots * n_job].reshape(slots, n_job)
    cluster = obs[slots * n_job :]
    picks = [slots if j is None else visible.index(j) for j in jobs]
    chosen = rows[picks[0]] if picks[0] < slots else np.zeros(n_job, np.float32)
    feats = [
        np.concatenate([r, r - chosen, cluster, [float(p == slots)]])
        for p in picks
        for r in [rows[p] if p < slots else np.zeros(n_job, np.float32)]
    ]
    return np.asarray(feats, np.float32)


def network(width: int = FEATURES) -> Any:
    """The advantage network: an option's features -> its advantage (torch initialises it from
    its global generator)."""
    import torch as th

    return th.nn.Sequential(
        th.nn.Linear(width, HIDDEN), th.nn.ReLU(), th.nn.Linear(HIDDEN, HIDDEN), th.nn.ReLU(), th.nn.Linear(HIDDEN, 1)
    )


class NetPredictor:
    """:data:`Predictor` of a network from :func:`network`."""

    def __init__(self, net: Any) -> None:
        self.net = net

    def __call__(self, feats: np.ndarray) -> np.ndarray:
        import torch as th

        with th.no_grad():
            p = self.net(th.from_numpy(feats)).squeeze(-1).numpy()
        return p - p[0]


def deviation(predict: Predictor, margin: float) -> Policy:
    """The option with the best predicted advantage where it beats the base's choice by more
    than ``margin`` (in the predictor's units), else the base's choice."""

    def policy(feats: np.ndarray) -> int:
        p = predict(feats)
        c = int(np.argmin(p))
        return c if p[c] < -margin else 0

    return policy


def episode(
    env: OrderingEnv,
    base: str,
    seed: int,
    width: int,
    policy: Policy | None = None,
    visit: Callable[[list[int | None], np.ndarray, bool], None] | None = None,
) -> tuple[dict, int, int]:
    """Play episode ``seed`` of the ordering env with ``base`` in the seat, except where ``policy``
    takes another of its options (:func:`lookahead.ordering_jobs`, ``width`` beside the base's
    choice). At each decision with a choice, before acting, ``visit`` sees the options, their
    features and whether an earlier decision departed from the base (the env's core is then at
    that decision). Returns the episode's metrics, its decisions with a choice and its deviations."""
    slots = env.slots
    obs, info = env.reset(options={"scenario_seed": seed})
    choices = deviations = 0
    while "metrics" not in info:
        a = env.expert_action(base)
        if policy is not None or visit is not None:
            visible = env.visible
            mine = None if a == slots else visible[a]
            jobs = lookahead.ordering_jobs(env.core, mine, visible, env.fits, slots, width)
            if len(jobs) > 1:
                feats = features(obs, slots, visible, jobs)
                if visit is not None:
                    visit(jobs, feats, deviations > 0)
                choices += 1
                k = policy(feats) if policy is not None else 0
                if k:
                    deviations += 1
                    job = jobs[k]
                    a = slots if job is None else visible.index(job)
        obs, _, _, _, info = env.step(a)
    return info["metrics"], choices, deviations


@dataclass(frozen=True)
class DeviationAgent:
    """A saved deviation agent: ``base`` in the ordering seat (and in every other seat), ``width``
    options beside its choice, ``margin`` in the network's units, ``max_jobs`` job slots;
    ``record``: agent.json's other fields (how it was trained), kept as written."""

    base: str
    width: int
    margin: float
    max_jobs: int
    net: Any
    record: Mapping[str, Any]

    def policy(self) -> Policy:
        return deviation(NetPredictor(self.net), self.margin)

    def play(self, env: OrderingEnv, seed: int) -> tuple[dict, int, int]:
        """:func:`episode` of this agent on ``env`` (an ordering env with ``max_jobs`` slots)."""
        return episode(env, self.base, seed, self.width, self.policy())


def save(
    folder: Path, net: Any, base: str, width: int, margin: float, max_jobs: int, record: Mapping[str, Any]
) -> None:
    """Write a deviation agent's folder (created if missing; files replaced whole)."""
    import torch as th

    from envs.sim.fileio import atomic_write

    folder.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    th.save(net.state_dict(), buf)
    fields = {
        "kind": "dagger",
        "base": base,
        "width": width,
        "margin": margin,
        "max_jobs": max_jobs,
        "obs_version": OBS_VERSION,
        "features": FEATURES,
        **record,
    }
    atomic_write(folder / NETWORK_FILE, buf.getvalue())
    atomic_write(folder / AGENT_FILE, json.dumps(fields, indent=2) + "\n")


def parse(folder: Path, agent_json: bytes, network_pt: bytes) -> DeviationAgent:
    """A deviation agent from its two files' bytes; a file that is not what :func:`save` writes is
    a ConfigError naming ``folder``."""
    import torch as th

    try:
        record = json.loads(agent_json)
        if not isinstance(record, dict) or record.get("kind") != "dagger":
            raise ValueError(f'{AGENT_FILE} is not a deviation agent\'s (no "kind": "dagger")')
        if record.get("obs_version") != OBS_VERSION or record.get("features") != FEATURES:
            raise ConfigError(
                f"{folder}: its network was trained for observation layout {record.get('obs_version')} "
                f"({record.get('features')} features an option), this code builds layout {OBS_VERSION} "
                f"({FEATURES}); retrain it."
            )
        base, width, margin, slots = record["base"], record["width"], record["margin"], record["max_jobs"]
        if not (
            isinstance(base, str) and isinstance(width, int) and isinstance(slots, int) and width >= 1 and slots >= 1
        ):
            raise ValueError(f"{AGENT_FILE} needs a base heuristic's name and whole numbers width and max_jobs >= 1")
        if not isinstance(margin, int | float) or margin < 0:
            raise ValueError(f"{AGENT_FILE}'s margin must be a number >= 0, got {margin!r}")
        net = network()
        net.load_state_dict(th.load(io.BytesIO(network_pt), weights_only=True))
    except ConfigError:
        raise
    except KeyError as e:
        raise ConfigError(f"{folder}: {AGENT_FILE} has no field {e}.") from None
    except Exception as e:  # any other failure to read either file means the folder is unusable
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"{folder}: not a deviation agent that this code loads ({first}).") from None
    net.eval()
    return DeviationAgent(base, width, float(margin), slots, net, record)
