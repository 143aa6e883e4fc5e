"""Dual training: an ordering agent and a placement agent, MaskablePPO each, in alternating rounds.

Each round trains the ordering agent in the ordering env with the placement agent frozen inside
it (as its placer), then the placement agent in the placement env with the ordering agent frozen
inside it (as its ordering component). Both may first be warm-started by behaviour cloning from
expert demonstrations. A run lives in one folder (see :mod:`agents.rundir`): its resolved config,
command line and commit, TensorBoard files, and checkpoints of both agents (latest and best).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch as th
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.logger import Logger, TensorBoardOutputFormat, configure
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

import envs  # noqa: F401  (registers the env ids)
from agents.bc import BCConfig, BCReport, behaviour_clone
from agents.dataset import RecordConfig, load_merged, record, save_demos
from agents.networks import SlotPolicy, ordering_policy_kwargs, placement_policy_kwargs
from agents.partners import AgentOrdering, AgentPlacer, run_episode
from envs.core import CoreConfig
from envs.obs import OBS_VERSION
from envs.ordering import OrderingEnv
from envs.placement import PlacementEnv
from envs.sim import scenarios
from envs.sim.fileio import atomic_write
from envs.sim.metrics import summarize
from heuristics import registry

log = logging.getLogger(__name__)

ORDERING, PLACEMENT = "ordering", "placement"
SCHED_KEYS = ("avg_jct_s", "p95_jct_s", "avg_queue_s", "utilization", "preemptions", "jobs_unfinished")


@dataclass
class TrainConfig:
    """Everything a training run depends on (saved as the run's config.yaml)."""

    scenario: str = "default"
    """scenario name (see evaluate.py --list)"""
    overrides: dict[str, str] = field(default_factory=dict)
    """``--set`` overrides of the scenario"""
    trace: str = ""
    """a CSV trace to train on (implies the trace scenario)"""
    exp: str = "dual"
    """experiment name, part of the run folder's name"""
    seed: int = 0
    """seed of the agents' initialisation, the envs' episode draws and BC shuffling"""
    total_steps: int = 40_000
    """env steps over all rounds, both agents together"""
    rounds: int = 2
    """alternating rounds (ordering then placement)"""
    ordering_share: float = 0.8
    """share of each round's steps that train the ordering agent"""
    n_envs: int = 4
    """parallel envs per agent (DummyVecEnv)"""
    max_jobs: int = 32
    """job slots K of the ordering agent"""
    placement: str = "aryl-nogroup"
    """heuristic that decides whether a job fits and its gang size (and places in round 0).
    Aryl's own components without its grouped placement (the paper's Table 6 ablation: elastic
    jobs on training servers first, flexible workers may share their base's servers), because
    on ``default`` the T4-first placement of elastic jobs costs JCT: SJF's ranking with these
    components scores 20,328 s avg JCT on the eval seeds against 22,220 s with ``aryl``'s
    (19,009 s against 21,217 s on seeds 300000-300019; standalone sjf 21,169 s and 20,304 s)"""
    scaling: str = "aryl-nogroup"
    """heuristic scaling the elastic jobs (Aryl's knapsack, flexible workers placed ungrouped)"""
    reclaim: str = "aryl"
    """heuristic returning loaned servers"""
    preemption: str = "aryl-nogroup"
    """heuristic acting before the starts of each decision (Aryl: scale in for phase 1)"""
    reward: str = "jct"
    """reward by name (envs.core.REWARDS)"""
    bc: bool = True
    """warm-start both agents by behaviour cloning"""
    experts: tuple[str, ...] = ("sjf",)
    """ordering experts whose demonstrations the ordering agent clones (SJF: the best ordering
    on ``default``; with Aryl's own components its clone scored 21,685 s avg JCT on the eval
    seeds, a clone of Aryl's and MLFS's rankings together 25,901 s)"""
    demo_episodes: int = 24
    """episodes of demonstrations per expert (24 and 60 BC passes, against 12 and 30: the clone
    alone scored 20,552 s avg JCT on the eval seeds against 20,952 s; PPO's best after it 20,552 s
    against 20,656 s)"""
    demo_seed: int = 50_000
    """first scenario seed of the demonstrations (kept apart from training and evaluation)"""
    bc_epochs: int = 60
    """behaviour-cloning passes over the demonstrations"""
    train_seeds: tuple[int, int] = (0, 10_000)
    """scenario seeds of training episodes: [lo, hi)"""
    eval_seeds: tuple[int, ...] = tuple(range(100_000, 100_010))
    """held-out scenario seeds for evaluation"""
    eval_every: int = 10_000
    """env steps between evaluations (and at the end of every phase)"""
    baselines: tuple[str, ...] = ("fifo", "sjf", "aryl")
    """heuristics evaluated on the same held-out seeds, logged beside the agents; each expert's
    ranking in the agents' ordering seat, with the run's components, is logged too (``<expert>-seat``)"""
    learning_rate: float = 1e-4
    placement_lr_scale: float = 0.3
    """the placement agent learns this much slower (its reward is mostly the ordering's doing)"""
    n_steps: int = 512
    """rollout length per env"""
    batch_size: int = 256
    n_epochs: int = 4
    gamma: float = 0.999
    gae_lambda: float = 0.95
    ent_coef: float = 0.005
    clip_range: float = 0.1
    hidden: int = 64
    """width of the slot networks"""
    activation: str = "relu"
    """of the slot networks: ``relu`` or ``tanh`` (torch's CPU tanh costs 25x a ReLU here: the
    networks train about 1.5x faster with ReLU, and clone and score as well)"""
    threads: int = 1
    """torch threads (1: two threads thrash a busy 2-core machine)"""

    def core_kwargs(self) -> dict[str, Any]:
        return dict(
            scenario=self.scenario,
            overrides=dict(self.overrides),
            trace=self.trace or None,
            placement=self.placement,
            scaling=self.scaling,
            reclaim=self.reclaim,
            preemption=self.preemption,
            reward=self.reward,
        )

    def core_config(self, seeds: tuple[int, int] | None = None) -> CoreConfig:
        return CoreConfig.from_kwargs(seeds=seeds or self.train_seeds, **self.core_kwargs())

    def phase_steps(self) -> list[tuple[int, str, int]]:
        """(round, agent, steps) in training order."""
        per_round = self.total_steps / max(1, self.rounds)
        out = []
        for r in range(self.rounds):
            o = round(per_round * self.ordering_share)
            out += [(r, ORDERING, o), (r, PLACEMENT, round(per_round) - o)]
        return [p for p in out if p[2] > 0]


@dataclass
class TrainState:
    """Progress, saved as state.json beside the checkpoints."""

    phase: int = 0  # index into TrainConfig.phase_steps() of the phase to run (or being run)
    in_phase: int = 0  # env steps of that phase already done (an interrupted phase resumes)
    steps: int = 0  # env steps done, both agents
    best_jct: float = math.inf
    evals: list[dict[str, Any]] = field(default_factory=list)
    bc: dict[str, Any] = field(default_factory=dict)


def _means(runs: list[dict[str, Any]]) -> dict[str, float]:
    """The mean of each of SCHED_KEYS over runs' metrics (a missing value counts as 0)."""
    return {k: float(np.mean([r[k] or 0.0 for r in runs])) for k in SCHED_KEYS}


class Trainer:
    """Runs (or resumes) one training run in ``run_dir``."""

    def __init__(self, config: TrainConfig, run_dir: Path, progress: Callable[[int], None] | None = None) -> None:
        self.config = config
        self.dir = run_dir
        self.progress = progress or (lambda n: None)
        th.set_num_threads(config.threads)
        self.ckpt = run_dir / "checkpoints"
        self.state = self._load_state()
        self.ordering_env = DummyVecEnv([self._ordering_env(i) for i in range(config.n_envs)])
        self.placement_env = DummyVecEnv([self._placement_env(i) for i in range(config.n_envs)])
        self.ordering = self._model(ORDERING, self.ordering_env)
        self.placement = self._model(PLACEMENT, self.placement_env)
        self._hparams_logged = False

    # ------------------------------------------------------------------ construction
    def _ordering_env(self, rank: int) -> Callable[[], gym.Env]:
        def make() -> gym.Env:
            env = Monitor(gym.make("loangym/Ordering-v0", max_jobs=self.config.max_jobs, **self._env_kwargs()))
            env.reset(seed=self.config.seed * 1000 + rank)
            return env

        return make

    def _placement_env(self, rank: int) -> Callable[[], gym.Env]:
        def make() -> gym.Env:
            env = Monitor(gym.make("loangym/Placement-v0", ordering=self.config.placement, **self._env_kwargs()))
            env.reset(seed=self.config.seed * 1000 + 500 + rank)
            return env

        return make

    def _env_kwargs(self) -> dict[str, Any]:
        return dict(seeds=self.config.train_seeds, **self.config.core_kwargs())

    def _logger(self, agent: str) -> Logger:
        return configure(str(self.dir / "tb" / agent), ["tensorboard"])

    def _model(self, agent: str, venv: DummyVecEnv) -> MaskablePPO:
        c = self.config
        latest = self.ckpt / f"{agent}_latest.zip"
        if latest.exists():
            model = MaskablePPO.load(latest, env=venv, device="cpu")
        else:
            env0: Any = venv.envs[0].unwrapped
            kwargs = (
                ordering_policy_kwargs(c.max_jobs, c.hidden, c.activation)
                if agent == ORDERING
                else placement_policy_kwargs(env0.num_servers, c.hidden, c.activation)
            )
            model = MaskablePPO(
                SlotPolicy,
                venv,
                learning_rate=c.learning_rate * (1.0 if agent == ORDERING else c.placement_lr_scale),
                n_steps=c.n_steps,
                batch_size=c.batch_size,
                n_epochs=c.n_epochs,
                gamma=c.gamma,
                gae_lambda=c.gae_lambda,
                ent_coef=c.ent_coef,
                clip_range=c.clip_range,
                policy_kwargs=kwargs,
                seed=c.seed + (0 if agent == ORDERING else 1),
                device="cpu",
                verbose=0,
            )
        model.set_logger(self._logger(agent))
        return model

    # ------------------------------------------------------------------ state
    def _load_state(self) -> TrainState:
        path = self.dir / "state.json"
        if path.exists():
            return TrainState(**json.loads(path.read_text(encoding="utf-8")))
        return TrainState()

    def save(self, best: bool = False) -> None:
        """Checkpoints of both agents and the state, each written atomically."""
        self.ckpt.mkdir(parents=True, exist_ok=True)
        for agent, model in ((ORDERING, self.ordering), (PLACEMENT, self.placement)):
            names = [f"{agent}_latest.zip"] + ([f"{agent}_best.zip"] if best else [])
            for name in names:
                tmp = self.ckpt / f".{name}.tmp.zip"
                model.save(tmp)
                tmp.replace(self.ckpt / name)
        atomic_write(self.dir / "state.json", json.dumps(dataclasses.asdict(self.state), indent=2) + "\n")

    # ------------------------------------------------------------------ behaviour cloning
    def warm_start(self, demo_dir: Path) -> dict[str, BCReport]:
        """Record (or reuse) demonstrations and clone them into both agents."""
        c = self.config
        reports = {}
        for agent, model, env, experts in (
            (ORDERING, self.ordering, self.ordering_env.envs[0], c.experts),
            (PLACEMENT, self.placement, self.placement_env.envs[0], (c.placement,)),
        ):
            paths = [self._demos(agent, expert, demo_dir) for expert in experts]
            demos = load_merged(paths, env=env)
            rep = behaviour_clone(model, demos, BCConfig(epochs=c.bc_epochs, seed=c.seed))
            reports[agent] = rep
            self.state.bc[agent] = dataclasses.asdict(rep) | {"experts": list(experts)}
            log.info("bc %s: held-out accuracy %.3f over %d steps", agent, rep.heldout_accuracy, rep.heldout_steps)
            model.logger.record(f"bc/{agent}_heldout_accuracy", rep.heldout_accuracy)
            model.logger.record(f"bc/{agent}_heldout_nll", rep.heldout_nll)
            model.logger.dump(step=0)
        return reports

    def _demos(self, agent: str, expert: str, demo_dir: Path) -> Path:
        """Demonstrations of ``expert`` in this run's env, generated if absent."""
        c = self.config
        rc = RecordConfig(
            expert=expert,
            env=agent,
            scenario=c.scenario,
            overrides=tuple(sorted(c.overrides.items())),
            trace=c.trace or None,
            episodes=c.demo_episodes,
            seed=c.demo_seed,
            max_jobs=c.max_jobs if agent == ORDERING else None,
            ordering=c.placement if agent == PLACEMENT else "expert",
            placement=c.placement if agent == ORDERING else "expert",
            scaling=c.scaling,
            reclaim=c.reclaim,
            preemption=c.preemption,
            reward=c.reward,
        )
        what = dataclasses.asdict(rc) | {"obs_version": OBS_VERSION}  # a layout change records afresh
        key = hashlib.sha1(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:10]
        path = demo_dir / f"{agent}_{expert}_{key}.npz"
        if not path.exists():
            save_demos(record(rc), path)
        return path

    # ------------------------------------------------------------------ training
    def train(self) -> TrainState:
        """Run the remaining phases; evaluate at the end of every phase and every eval_every steps."""
        c = self.config
        self._log_hparams()
        for i, (rnd, agent, steps) in enumerate(c.phase_steps()):
            if i < self.state.phase:
                continue
            self._freeze_partner(agent)
            model = self.ordering if agent == ORDERING else self.placement
            left = steps - self.state.in_phase
            log.info("round %d: training the %s agent for %d steps", rnd, agent, left)
            if left > 0:
                model.learn(
                    left,
                    reset_num_timesteps=False,
                    callback=CallbackList([SchedCallback(), StepCallback(self, agent)]),
                )
            self.state.phase, self.state.in_phase = i + 1, 0
            self.evaluate()
            self.save()
        return self.state

    def _freeze_partner(self, agent: str) -> None:
        """Put the other agent (frozen) in the seat it does not train."""
        if agent == ORDERING:
            frozen = self.state.phase > 0 or self.config.bc
            for env in self.ordering_env.envs:  # one placer per env: each keeps its env's encoder
                cast(OrderingEnv, env.unwrapped).placer = AgentPlacer(self.placement) if frozen else None
        else:
            for env in self.placement_env.envs:
                pe = cast(PlacementEnv, env.unwrapped)
                pe.ordering_spec = AgentOrdering(self.ordering, pe.core, self.config.max_jobs)

    # ------------------------------------------------------------------ evaluation
    def baseline_metrics(self) -> dict[str, dict[str, float]]:
        """Mean metrics over the held-out seeds (same scenario) of each baseline heuristic, and of
        each expert's ranking in the ordering seat with this run's components (``<expert>-seat``:
        where the cloned ordering agent starts from)."""
        c = self.config
        cfg = c.core_config()
        scen = cfg.scenario_obj()
        out = {
            name: _means([summarize(scenarios.simulate(scen, registry.make(name), s)) for s in c.eval_seeds])
            for name in c.baselines
        }
        for expert in c.experts:
            out[f"{expert}-seat"] = _means([run_episode(cfg, s, expert, None, c.max_jobs) for s in c.eval_seeds])
        return out

    def evaluate(self) -> dict[str, Any]:
        """Both agents, deterministic, on the held-out seeds; logged under eval/ with baselines."""
        c = self.config
        if not hasattr(self, "_baselines"):
            self._baselines = self.baseline_metrics()
        cfg = c.core_config()
        agent = _means([run_episode(cfg, s, self.ordering, self.placement, c.max_jobs) for s in c.eval_seeds])
        step = self.state.steps
        logger = self.ordering.logger
        for k, v in agent.items():
            logger.record(f"eval/{k}/agent", v)
        for name, metrics in self._baselines.items():
            for k, v in metrics.items():
                logger.record(f"eval/{k}/{name}", v)
        logger.dump(step=step)
        entry = {"steps": step, "agent": agent, "baselines": self._baselines}
        self.state.evals.append(entry)
        # the average JCT counts finished jobs only: a checkpoint that leaves jobs unfinished is never the best
        improved = agent["jobs_unfinished"] == 0 and agent["avg_jct_s"] < self.state.best_jct
        if improved:
            self.state.best_jct = agent["avg_jct_s"]
        self.save(best=improved)
        log.info("eval at %d steps: agent avg JCT %.0f s", step, agent["avg_jct_s"])
        return entry

    def layout(self) -> dict[str, int]:
        """The agents' observation layout (saved as layout.json; evaluation checks it)."""
        o: Any = self.ordering_env.envs[0].unwrapped
        pe: Any = self.placement_env.envs[0].unwrapped
        return {
            "obs_version": OBS_VERSION,
            "max_jobs": self.config.max_jobs,
            "ordering_obs_dim": int(o.observation_space.shape[0]),
            "num_servers": int(pe.num_servers),
            "placement_obs_dim": int(pe.observation_space.shape[0]),
        }

    def _log_hparams(self) -> None:
        if self._hparams_logged:
            return
        self._hparams_logged = True
        rows = "\n".join(f"| {k} | {v} |" for k, v in dataclasses.asdict(self.config).items())
        for fmt in self.ordering.logger.output_formats:
            if isinstance(fmt, TensorBoardOutputFormat):
                fmt.writer.add_text("hyperparameters", "| parameter | value |\n|---|---|\n" + rows, 0)
                fmt.writer.flush()


class SchedCallback(BaseCallback):
    """sched/ scalars from every finished episode's metrics (averaged per rollout)."""

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", []):
            metrics = info.get("metrics")
            if metrics:
                for k in SCHED_KEYS:
                    if metrics.get(k) is not None:
                        self.logger.record_mean(f"sched/{k}", metrics[k])
        return True


class StepCallback(BaseCallback):
    """Counts steps for the run (progress, periodic evaluation)."""

    def __init__(self, trainer: Trainer, agent: str) -> None:
        super().__init__()
        self.trainer, self.agent = trainer, agent
        self._since_eval = 0

    def _on_step(self) -> bool:
        n = self.training_env.num_envs
        self.trainer.state.steps += n
        self.trainer.state.in_phase += n
        self.trainer.progress(n)
        self._since_eval += n
        if self._since_eval >= self.trainer.config.eval_every:
            self._since_eval = 0
            self.trainer.evaluate()
        return True
