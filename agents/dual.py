"""Dual training: an ordering agent and a placement agent, MaskablePPO each, in alternating rounds.

Each round trains the ordering agent in the ordering env with the placement agent frozen inside
it (as its placer), then the placement agent in the placement env with the ordering agent frozen
inside it (as its ordering component). Both may first be warm-started by behaviour cloning from
expert demonstrations. A run lives in one folder (see :mod:`agents.rundir`): its resolved config,
command line and commit, TensorBoard files, and checkpoints of both agents (latest and best).

Progress is committed to the run folder (state.json with the checkpoints it names, written so
that any kill leaves the previous commit or the new one) after each behaviour cloning, after each
rollout with the training it paid for, and after each evaluation. A resumed run continues from
the last commit: whatever came after it (a cloning, a rollout, an evaluation) is done again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import math
import re
import time
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch as th
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.logger import KVWriter, Logger, make_output_format
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

import envs  # noqa: F401  (registers the env ids)
from agents import rundir
from agents.bc import BCConfig, BCReport, behaviour_clone
from agents.dataset import RecordConfig, load_merged, record, save_demos
from agents.networks import ACTIVATIONS, SlotPolicy, ordering_policy_kwargs, placement_policy_kwargs
from agents.partners import AgentOrdering, AgentPlacer, run_episode
from envs import lookahead
from envs.core import REWARDS, Components, CoreConfig, composed
from envs.obs import OBS_VERSION
from envs.ordering import OrderingEnv
from envs.placement import PlacementEnv
from envs.sim import scenarios
from envs.sim.config import ConfigError
from envs.sim.fileio import atomic_write
from envs.sim.inference import InferenceConfigError
from envs.sim.metrics import summarize
from envs.sim.workload import TraceError
from heuristics import registry

log = logging.getLogger(__name__)

ORDERING, PLACEMENT = "ordering", "placement"
DEFAULT_COMPONENTS = ("aryl-nogroup", "aryl-nogroup", "aryl", "aryl-nogroup")
"""The training runs' placement, scaling, reclaim and preemption heuristics by default."""
AGENTS = (ORDERING, PLACEMENT)
SCHED_KEYS = ("avg_jct_s", "p95_jct_s", "avg_queue_s", "utilization", "preemptions", "jobs_unfinished")
"""the figures of every evaluation (and each run's :meth:`TrainConfig.figure` beside them)"""


def latest(agent: str) -> str:
    """File name (in checkpoints/) of an agent's latest checkpoint."""
    return f"{agent}_latest.zip"


def best(agent: str) -> str:
    """File name (in checkpoints/) of an agent's checkpoint at the best evaluation."""
    return f"{agent}_best.zip"


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
    """env steps over all rounds, both agents together: exactly what is trained (to the nearest
    multiple of ``n_envs``, see :meth:`phase_steps`)"""
    extensions: tuple[tuple[int, int], ...] = ()
    """each budget change of the run (``--resume RUN --total-steps N``) as (env steps done then,
    ``total_steps`` before): the phases done by then keep their steps, and the rest is planned as
    a new run of the remaining steps would be (see :meth:`phase_steps`)"""
    rounds: int = 2
    """alternating rounds (ordering then placement)"""
    ordering_share: float = 0.8
    """share of each round's steps that train the ordering agent"""
    n_envs: int = 4
    """parallel envs per agent (DummyVecEnv)"""
    max_jobs: int = 32
    """job slots K of the ordering agent"""
    components: Components = field(default_factory=lambda: Components(*DEFAULT_COMPONENTS))
    """the heuristics in the seats no agent controls (``--set components.placement=aryl``): the
    placement decides whether a job fits and its gang size (and places in round 0), the scaling
    sets elastic jobs' flexible workers, the reclaim returns loans, the preemption acts first at
    each decision. By default Aryl's own, without its grouped, T4-first placement of elastic
    jobs (the paper's Table 6 ablation), which costs JCT on ``default`` (the README has the
    figures)"""
    reward: str = "jct"
    """reward by name (envs.core.REWARDS)"""
    reward_reference: str = ""
    """a heuristic by name, or empty: each episode's rewards are then measured against that
    heuristic's own run of the same episode (``envs.core.CoreConfig.reward_reference``), so a
    return is how much better than it the agents did; the evaluations and the best checkpoint
    still go by the figure itself"""
    bc: bool = True
    """warm-start both agents by behaviour cloning"""
    experts: tuple[str, ...] = ("sjf",)
    """ordering experts whose demonstrations the ordering agent clones (SJF: the best ordering
    on ``default``)"""
    demo_episodes: int = 24
    """episodes of demonstrations per expert"""
    demo_seed: int = 50_000
    """first scenario seed of the demonstrations (kept apart from training and evaluation)"""
    bc_epochs: int = 60
    """behaviour-cloning passes over the demonstrations"""
    train_seeds: tuple[int, int] = (0, 10_000)
    """scenario seeds of training episodes: [lo, hi)"""
    eval_seeds: tuple[int, ...] = tuple(range(100_000, 100_010))
    """held-out scenario seeds for evaluation"""
    eval_every: int = 10_000
    """env steps between evaluations, at the end of the first rollout that reaches them (and at
    the end of every phase)"""
    baselines: tuple[str, ...] = ("fifo", "sjf", "aryl")
    """heuristics evaluated on the same held-out seeds, logged beside the agents; each expert's
    ranking in the agents' ordering seat, with the run's components, is logged too (``<expert>-seat``)"""
    learning_rate: float = 1e-4
    placement_lr_scale: float = 0.3
    """the placement agent learns this much slower (its reward is mostly the ordering's doing)"""
    n_steps: int = 512
    """rollout length per env (a phase's last rollout is shorter if that is what is left)"""
    batch_size: int = 256
    n_epochs: int = 4
    gamma: float = 0.999
    gae_lambda: float = 0.95
    ent_coef: float = 0.005
    clip_range: float = 0.1
    hidden: int = 64
    """width of the slot networks"""
    activation: str = "relu"
    """of the slot networks: ``relu`` or ``tanh`` (ReLU: torch's CPU tanh costs far more here)"""
    threads: int = 1
    """torch threads (1: two threads thrash a busy 2-core machine)"""

    @property
    def figure(self) -> str:
        """The figure the reward sums to (``envs.core.Reward.figure``): the best checkpoint is the
        one that evaluates best by it."""
        return REWARDS[self.reward].figure

    def better(self, value: float, than: float | None) -> bool:
        """Whether ``value`` of :attr:`figure` beats ``than`` (None: no value yet)."""
        return than is None or (value < than if REWARDS[self.reward].lower_better else value > than)

    def eval_keys(self) -> tuple[str, ...]:
        """The figures each evaluation records: SCHED_KEYS and :attr:`figure`."""
        return SCHED_KEYS if self.figure in SCHED_KEYS else (*SCHED_KEYS, self.figure)

    def best_tag(self) -> str:
        """TensorBoard tag of the agent's best evaluation so far (the ``*_best.zip`` checkpoints')."""
        return f"eval/best_{self.figure}"

    def core_kwargs(self) -> dict[str, Any]:
        return dict(
            scenario=self.scenario,
            overrides=dict(self.overrides),
            trace=self.trace or None,
            components=self.components,
            reward=self.reward,
        )

    def core_config(self, seeds: tuple[int, int] | None = None) -> CoreConfig:
        """The agents' episodes; the jobs that must be runnable are those every policy the run
        compares (its placement component's and the baselines) can run, so all replay the same."""
        borrowing = all(registry.make(n).borrows for n in (self.components.placement, *self.baselines))
        return CoreConfig.from_kwargs(seeds=seeds or self.train_seeds, borrowing=borrowing, **self.core_kwargs())

    def phase_steps(self) -> list[tuple[int, str, int]]:
        """(round, agent, steps) in training order: exactly the steps each phase trains.

        Every step of a vector env moves all ``n_envs`` envs, so each phase is a multiple of
        ``n_envs`` and the phases add up to ``total_steps`` rounded to the nearest multiple of
        ``n_envs`` (at least one): :meth:`planned_steps`. The steps are split into ``rounds``
        rounds, each ``ordering_share`` ordering then the rest placement. After a budget change
        (:attr:`extensions`) the phases done by then stay as they were (the one under way ends
        there) and the remaining steps are split in the same way, in rounds numbered on."""
        totals = [total for _, total in self.extensions] + [self.total_steps]
        plan: list[tuple[int, str, int]] = []
        start = 0  # steps done when the budget of ``total`` was set
        for i, total in enumerate(totals):
            segment = self._split(total - start, first_round=plan[-1][0] + 1 if plan else 0, at_least_one=i == 0)
            if i < len(self.extensions):
                cut = self.extensions[i][0]
                segment, start = _cut(segment, cut - start), cut
            plan += segment
        return plan

    def _split(self, steps: int, first_round: int, at_least_one: bool) -> list[tuple[int, str, int]]:
        units = round(steps / self.n_envs)  # vector steps
        units = max(1, units) if at_least_one else max(0, units)
        out = []
        for r in range(self.rounds):
            u = units * (r + 1) // self.rounds - units * r // self.rounds
            o = round(u * self.ordering_share)
            out += [(first_round + r, ORDERING, o * self.n_envs), (first_round + r, PLACEMENT, (u - o) * self.n_envs)]
        return [p for p in out if p[2] > 0]

    def planned_steps(self) -> int:
        """Env steps the run trains in all (``total_steps`` unless it is no multiple of ``n_envs``)."""
        return sum(p[2] for p in self.phase_steps())

    def validate(self, name_of: Callable[[str], str] = lambda f: f"setting '{f}'") -> None:
        """Raise ConfigError (one sentence, the field named by ``name_of``) unless every field is
        of its type and valid by its meaning (:data:`RULES`: one rule per field) and the fields
        together build the training scenario."""
        hints = typing.get_type_hints(TrainConfig)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            problem = _type_problem(value, hints[f.name])
            if problem is None:
                try:
                    problem = RULES[f.name](value, self)
                except (ConfigError, TraceError, InferenceConfigError) as e:
                    raise ConfigError(f"{name_of(f.name)}: {e}") from None
            if problem:
                raise ConfigError(f"{name_of(f.name)} {problem}.")
        if self.n_steps * self.n_envs < 2:
            raise ConfigError(
                f"{name_of('n_steps')} times {name_of('n_envs')} must be at least 2 (PPO normalises "
                f"advantages over a rollout), got {self.n_steps} x {self.n_envs}."
            )
        if self.bc and not self.experts:
            raise ConfigError(f"{name_of('experts')} must name an expert to clone when behaviour cloning is on.")
        try:
            core = self.core_config()
            scenarios.build(core.scenario_obj(), self.train_seeds[0], bool(core.borrowing))
        except (ConfigError, TraceError, InferenceConfigError) as e:
            raise ConfigError(f"{name_of('trace' if self.trace else 'overrides')}: {e}") from None


# ---------------------------------------------------------------------------------------------- rules
Rule = Callable[[Any, TrainConfig], "str | None"]
"""A field's value (already of its type) and the whole config -> what is wrong, or None. A rule
may also raise ConfigError (or a trace / inference error) with its own sentence."""


def _at_least(lo: float) -> Rule:
    return lambda v, c: None if v >= lo else f"must be at least {lo}, got {v}"


def _above(lo: float) -> Rule:
    return lambda v, c: None if v > lo else f"must be above {lo}, got {v}"


def _between(lo: int, hi: int) -> Rule:
    return lambda v, c: None if lo <= v <= hi else f"must be between {lo} and {hi}, got {v}"


def _unit(open_low: bool) -> Rule:
    interval = "(0, 1]" if open_low else "[0, 1]"

    def rule(v: float, c: TrainConfig) -> str | None:
        return None if (v > 0 if open_low else v >= 0) and v <= 1 else f"must be in {interval}, got {v}"

    return rule


def _one_of(choices: Iterable[str]) -> Rule:
    names = tuple(choices)
    return lambda v, c: None if v in names else f"must be one of {', '.join(names)}, got '{v}'"


def _each(rule: Rule) -> Rule:
    def each(values: Any, c: TrainConfig) -> str | None:
        return next((p for p in (rule(v, c) for v in values) if p), None)

    return each


def _type_only(v: Any, c: TrainConfig) -> None:
    return None


def _scenario_name(v: str, c: TrainConfig) -> None:
    if not c.trace:
        scenarios.get(v)


def _overrides(v: dict[str, str], c: TrainConfig) -> None:
    scenarios.get("trace" if c.trace else c.scenario, v)  # the trace itself is read by the last check


def _trace(v: str, c: TrainConfig) -> str | None:
    return None if not v or Path(v).is_file() else f"is not a file: '{v}'"


def _exp(v: str, c: TrainConfig) -> str | None:
    ok = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", v)
    return None if ok else f"must be a name of letters, digits, '.', '_' and '-' (it names the run folder), got '{v}'"


def _components(v: Components, c: TrainConfig) -> None:
    v.validate(scenarios.get("trace" if c.trace else c.scenario, c.overrides).information.level)


def _component(v: str, c: TrainConfig) -> None:
    composed(v)


def _expert(v: str, c: TrainConfig) -> None:
    composed(lookahead.heuristic_of(v))


def _policy(v: str, c: TrainConfig) -> None:
    registry.entry(v)


def _reference(v: str, c: TrainConfig) -> None:
    if v:
        registry.entry(v)
        registry.check_information(v, scenarios.get("trace" if c.trace else c.scenario, c.overrides).information.level)


def _seed_range(v: tuple[int, int], c: TrainConfig) -> str | None:
    return None if 0 <= v[0] < v[1] else f"must be seeds lo:hi with 0 <= lo < hi, got {v[0]}:{v[1]}"


def _extensions(v: tuple[tuple[int, int], ...], c: TrainConfig) -> str | None:
    done = [d for d, _ in v]
    ok = done == sorted(done) and all(d >= 0 and d % c.n_envs == 0 and t >= 1 for d, t in v)
    ok = ok and (not v or done[-1] <= c.total_steps)
    return (
        None
        if ok
        else "must be (steps done, total steps before) pairs, the steps done rising, multiples of n_envs "
        f"and at most total_steps, got {[list(e) for e in v]}"
    )


def _seed_list(v: tuple[int, ...], c: TrainConfig) -> str | None:
    return None if v and min(v) >= 0 else f"must list at least one seed and no negative one, got {list(v)}"


RULES: dict[str, Rule] = {
    "scenario": _scenario_name,
    "overrides": _overrides,
    "trace": _trace,
    "exp": _exp,
    "seed": _between(0, 2**32 - 2),  # numpy's global seed (the placement agent's is seed + 1)
    "total_steps": _at_least(1),
    "extensions": _extensions,
    "rounds": _at_least(1),
    "ordering_share": _unit(open_low=False),
    "n_envs": _at_least(1),
    "max_jobs": _at_least(1),
    "components": _components,
    "reward": _one_of(REWARDS),
    "reward_reference": _reference,
    "bc": _type_only,
    "experts": _each(_expert),
    "demo_episodes": _at_least(1),
    "demo_seed": _at_least(0),
    "bc_epochs": _at_least(1),
    "train_seeds": _seed_range,
    "eval_seeds": _seed_list,
    "eval_every": _at_least(1),
    "baselines": _each(_policy),
    "learning_rate": _above(0),
    "placement_lr_scale": _above(0),
    "n_steps": _at_least(1),
    "batch_size": _at_least(2),  # SB3's PPO normalises advantages within each minibatch
    "n_epochs": _at_least(1),
    "gamma": _unit(open_low=True),
    "gae_lambda": _unit(open_low=True),
    "ent_coef": _at_least(0),
    "clip_range": _above(0),
    "hidden": _at_least(1),
    "activation": _one_of(ACTIVATIONS),
    "threads": _at_least(1),
}
"""The rule of every TrainConfig field, by its meaning (tests/test_train_robust.py checks that
each field has one and that a bad value of each is refused)."""


def _type_problem(value: Any, tp: Any) -> str | None:
    """What is wrong with ``value`` as a ``tp`` (the field types of TrainConfig), or None."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is bool:
        ok, want = isinstance(value, bool), "true or false"
    elif tp is int:
        ok, want = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        want = "a finite number"
    elif tp is str:
        ok, want = isinstance(value, str), "a string"
    elif origin is tuple and args[-1] is Ellipsis:
        ok = isinstance(value, tuple) and all(_type_problem(v, args[0]) is None for v in value)
        want = f"a list of {'integers' if args[0] is int else 'names' if args[0] is str else 'pairs of integers'}"
    elif origin is tuple:
        ok = isinstance(value, tuple) and len(value) == len(args)
        ok = ok and all(_type_problem(v, a) is None for v, a in zip(value, args, strict=True))
        want = f"{len(args)} integers"
    elif isinstance(tp, type) and dataclasses.is_dataclass(tp):
        ok, want = isinstance(value, tp), f"a {tp.__name__}"
    elif origin is dict:
        ok = isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        want = "a mapping of setting names to values"
    else:
        raise TypeError(f"TrainConfig: no type check for {tp}")
    return None if ok else f"expects {want}, got {value!r}"


def _cut(plan: list[tuple[int, str, int]], steps: int) -> list[tuple[int, str, int]]:
    """The phases of ``plan`` that its first ``steps`` steps cover (the last one cut short)."""
    out, done = [], 0
    for rnd, agent, n in plan:
        if done >= steps:
            break
        out.append((rnd, agent, min(n, steps - done)))
        done += n
    return out


@dataclass
class TrainState:
    """Progress, saved as state.json beside the checkpoints (see :mod:`agents.rundir`)."""

    phase: int = 0  # index into TrainConfig.phase_steps() of the phase to run (or being run)
    in_phase: int = 0  # env steps of that phase done (an interrupted phase resumes)
    steps: int = 0  # env steps done, both agents: trained into the checkpoints
    best: float | None = None  # config.figure at the best evaluation so far (its agents: the *_best.zip checkpoints)
    evals: list[dict[str, Any]] = field(default_factory=list)
    bc: dict[str, Any] = field(default_factory=dict)  # agent -> its cloning report, once committed
    generation: int = 0  # commits so far
    checkpoints: dict[str, str] = field(default_factory=dict)  # file in checkpoints/ -> its SHA-1


def hparams(config: TrainConfig) -> dict[str, bool | str | float]:
    """The config as TensorBoard hyper-parameters: one per field, a dataclass's or mapping's
    fields one each (``components.placement``, ``overrides.workload.synthetic.num_jobs``), lists
    as text."""
    out: dict[str, bool | str | float] = {}

    def put(key: str, v: Any) -> None:
        if isinstance(v, bool | str | int | float):
            out[key] = v
        else:
            out[key] = ",".join(map(str, v)) if isinstance(v, tuple) else str(v)

    for f in dataclasses.fields(config):
        v = getattr(config, f.name)
        if dataclasses.is_dataclass(v):
            for g in dataclasses.fields(v):
                put(f"{f.name}.{g.name}", getattr(v, g.name))
        elif isinstance(v, dict):
            for k in sorted(v):
                put(f"{f.name}.{k}", v[k])
        else:
            put(f.name, v)
    return out


HPARAMS_FILE = "events.out.tfevents.0.hparams"
"""The TensorBoard event file (in tb/ordering) of the run's hyper-parameters. TensorBoard's
hparams plugin shows the first record of a run (in file-name order), and SB3's event files are
only ever appended to (a new one at each resume): so the record lives in a file of its own that
holds only it, rewritten whole whenever the config may change, and named to come before SB3's
files (``events.out.tfevents.<time>...``)."""


def hparams_events(config: TrainConfig) -> bytes:
    """The contents of :data:`HPARAMS_FILE`: the config as one hparams session (the summaries of
    SB3's ``HParam``: :func:`hparams`, with the agent's ``eval/`` figures and
    :meth:`TrainConfig.best_tag` as its metrics, whose latest values TensorBoard reads from the scalars of
    tb/ordering) and as a text table, all at step 0."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.summary.writer.record_writer import RecordWriter
    from torch.utils.tensorboard.summary import hparams as hparams_summaries
    from torch.utils.tensorboard.summary import text

    metrics = {f"eval/{k}/agent": 0.0 for k in config.eval_keys()} | {config.best_tag(): 0.0}  # values not read
    rows = "\n".join(f"| {k} | {v} |" for k, v in dataclasses.asdict(config).items())
    table = text("hyperparameters", "| parameter | value |\n|---|---|\n" + rows)
    now = time.time()
    buf = io.BytesIO()
    records = RecordWriter(buf)
    records.write(Event(wall_time=now, file_version="brain.Event:2").SerializeToString())
    for summary in (table, *hparams_summaries(hparams(config), metrics)):
        records.write(Event(wall_time=now, step=0, summary=summary).SerializeToString())
    return buf.getvalue()


def _means(runs: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, float]:
    """The mean of each of ``keys`` over runs' metrics (a missing value counts as 0)."""
    return {k: float(np.mean([r[k] or 0.0 for r in runs])) for k in keys}


def _blob(model: MaskablePPO) -> bytes:
    buf = io.BytesIO()
    model.save(buf)
    return buf.getvalue()


class Trainer:
    """Runs (or resumes) one training run.

    Construction reads but writes nothing: the envs and agents of ``config``; with ``resume``,
    the agents of the run folder's last commit (a corrupt or inconsistent folder raises
    :class:`agents.rundir.RunDirError`). Writing starts with :meth:`create` (a new run folder
    under a root) or :meth:`resume`."""

    def __init__(
        self, config: TrainConfig, resume: Path | None = None, progress: Callable[[int], None] | None = None
    ) -> None:
        self.config = config
        self.progress = progress or (lambda n: None)
        self.on_eval: Callable[[dict[str, Any]], None] = lambda entry: None
        """sees each evaluation once it is committed"""
        self._pending = 0  # env steps of the rollout under way (not yet committed)
        th.set_num_threads(config.threads)
        self.dir = resume
        blobs: dict[str, tuple[Path, bytes]] = {}
        self.state = TrainState()
        if resume is not None:
            self.state, blobs = rundir.read_state(resume, config)
        self.ordering_env = DummyVecEnv([self._ordering_env(i) for i in range(config.n_envs)])
        self.placement_env = DummyVecEnv([self._placement_env(i) for i in range(config.n_envs)])
        self.ordering = self._model(ORDERING, self.ordering_env, blobs.get(latest(ORDERING)))
        self.placement = self._model(PLACEMENT, self.placement_env, blobs.get(latest(PLACEMENT)))
        self._layout_saved = resume is None or rundir.check_layout(resume, self.layout())
        self._seated: int | None = None  # the phase whose partner sits frozen in its env

    # ------------------------------------------------------------------ construction
    def _ordering_env(self, rank: int) -> Callable[[], gym.Env]:
        def make() -> gym.Env:
            env = Monitor(gym.make("loangym/Ordering-v1", max_jobs=self.config.max_jobs, **self._env_kwargs()))
            env.reset(seed=self.config.seed * 1000 + rank)
            return env

        return make

    def _placement_env(self, rank: int) -> Callable[[], gym.Env]:
        def make() -> gym.Env:
            ordering = self.config.components.placement
            env = Monitor(gym.make("loangym/Placement-v1", ordering=ordering, **self._env_kwargs()))
            env.reset(seed=self.config.seed * 1000 + 500 + rank)
            return env

        return make

    def _env_kwargs(self) -> dict[str, Any]:
        c = self.config  # the training envs' rewards only: evaluations go by the figures themselves
        return dict(seeds=c.train_seeds, reward_reference=c.reward_reference or None, **c.core_kwargs())

    def _model(self, agent: str, venv: DummyVecEnv, saved: tuple[Path, bytes] | None) -> MaskablePPO:
        c = self.config
        if saved is not None:
            path, data = saved
            try:
                model = MaskablePPO.load(io.BytesIO(data), env=venv, device="cpu")
            except Exception as e:  # any failure to load means this folder cannot be resumed here
                first = str(e).strip().splitlines()[0].rstrip(":") if str(e).strip() else type(e).__name__
                raise rundir.RunDirError(
                    f"{path}: does not load as the {agent} agent of config.yaml ({first})."
                ) from None
            model._last_obs = None  # type: ignore[assignment]  # start on the envs' first observations, as a new run
            return model
        env0: Any = venv.envs[0].unwrapped
        kwargs = (
            ordering_policy_kwargs(c.max_jobs, c.hidden, c.activation)
            if agent == ORDERING
            else placement_policy_kwargs(env0.num_servers, c.hidden, c.activation)
        )
        return MaskablePPO(
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

    def model(self, agent: str) -> MaskablePPO:
        return self.ordering if agent == ORDERING else self.placement

    # ------------------------------------------------------------------ the run folder
    def create(self, root: Path, command: list[str]) -> Path:
        """A new run folder under ``root`` with its run files, its hparams record
        (:data:`HPARAMS_FILE`) and first commit (nothing done)."""
        self.dir = rundir.new_run_dir(self.config, root)
        rundir.write_run_files(self.dir, self.config, command, self.layout())
        self._write_hparams()
        self._open_logs()
        self._commit()
        return self.dir

    def resume(self, command: list[str]) -> bool:
        """Start writing to the resumed folder: finish the save of its last commit (and drop what
        came after it), write config.yaml if the config changed (:func:`agents.rundir.resumed_config`),
        append the command line, write the hparams record again (:data:`HPARAMS_FILE`); a deleted
        layout.json is written again from the config (the checkpoints loaded into envs of that
        layout). True if it was."""
        assert self.dir is not None
        rundir.settle(self.dir)
        rundir.write_config(self.dir, self.config)  # a new budget, or the settings a resume may change
        with (self.dir / "command.txt").open("a", encoding="utf-8") as f:
            f.write(" ".join(command) + "\n")
        rewritten = not self._layout_saved
        if rewritten:
            rundir.write_layout(self.dir, self.layout())
        self._write_hparams()
        self._open_logs()
        return rewritten

    def _open_logs(self) -> None:
        assert self.dir is not None
        for agent in AGENTS:
            self.model(agent).set_logger(self._logger(agent))

    def _logger(self, agent: str) -> Logger:
        assert self.dir is not None
        folder = str(self.dir / "tb" / agent)
        return GlobalStepLogger(folder, [make_output_format("tensorboard", folder)], self.global_step)

    def global_step(self) -> int:
        """Env steps of both agents together, the rollout under way included: the step of every
        TensorBoard point of both agents."""
        return self.state.steps + self._pending

    def _commit(self, blobs: dict[str, bytes] | None = None, **changes: Any) -> None:
        """Make the state with ``changes`` (and the checkpoints ``blobs``: file name -> bytes) the
        run's state; in memory, the state is always the last one committed."""
        assert self.dir is not None
        self.state = rundir.commit(self.dir, dataclasses.replace(self.state, **changes), blobs or {})

    # ------------------------------------------------------------------ behaviour cloning
    def warm_start(self, demo_dir: Path, report: Callable[[str, BCReport], None] | None = None) -> dict[str, BCReport]:
        """Record (or reuse) demonstrations and clone them into each agent not yet cloned (as
        state.json says); each cloning is committed with its agent's checkpoint, then passed to
        ``report``. The reports of the clonings done now."""
        c = self.config
        reports = {}
        for agent, env, experts in (
            (ORDERING, self.ordering_env.envs[0], c.experts),
            (PLACEMENT, self.placement_env.envs[0], (c.components.placement,)),
        ):
            if agent in self.state.bc:
                continue
            model = self.model(agent)
            paths = [self._demos(agent, expert, demo_dir) for expert in experts]
            demos = load_merged(paths, env=env)
            rep = behaviour_clone(model, demos, BCConfig(epochs=c.bc_epochs, seed=c.seed))
            rundir.pause_point(f"bc:{agent}")
            bc = {**self.state.bc, agent: dataclasses.asdict(rep) | {"experts": list(experts)}}
            self._commit(blobs={latest(agent): _blob(model)}, bc=bc)
            reports[agent] = rep
            if report is not None:
                report(agent, rep)
            log.info("bc %s: held-out accuracy %.3f over %d steps", agent, rep.heldout_accuracy, rep.heldout_steps)
            model.logger.record(f"bc/{agent}_heldout_accuracy", rep.heldout_accuracy)
            model.logger.record(f"bc/{agent}_heldout_nll", rep.heldout_nll)
            model.logger.dump()
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
            ordering=c.components.placement if agent == PLACEMENT else "expert",
            components=dataclasses.replace(
                c.components, placement=c.components.placement if agent == ORDERING else "expert"
            ),
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
        """Run what is left of the phases, one rollout at a time, each committed with its agent's
        checkpoint; evaluate when due (:meth:`eval_due`)."""
        c = self.config
        plan = c.phase_steps()
        if self.eval_due():
            self.evaluate()
        while self.state.phase < len(plan):
            rnd, agent, steps = plan[self.state.phase]
            s = self.state
            if s.in_phase < steps:
                if self._seated != s.phase:
                    log.info("round %d: training the %s agent for %d steps", rnd, agent, steps - s.in_phase)
                    self._freeze_partner(agent)
                    self._seated = s.phase
                n = min(c.n_steps, (steps - s.in_phase) // c.n_envs) * c.n_envs
                self._rollout(agent, n)
                blobs = {latest(agent): _blob(self.model(agent))}
            else:  # the phase was cut short (a budget change: TrainConfig.extensions)
                n, blobs = 0, {}
            done = s.in_phase + n >= steps
            self._pending = 0
            self._commit(
                blobs=blobs,
                phase=s.phase + done,
                in_phase=0 if done else s.in_phase + n,
                steps=s.steps + n,
            )
            if self.eval_due():
                self.evaluate()
        return self.state

    def _rollout(self, agent: str, steps: int) -> None:
        """One PPO iteration of ``agent``: a rollout of ``steps`` env steps, then its training."""
        model, n = self.model(agent), steps // self.config.n_envs
        if model.n_steps != n or model.rollout_buffer.buffer_size != n:  # a phase's last rollout is short
            b = model.rollout_buffer
            model.n_steps = n
            model.rollout_buffer = type(b)(
                n,
                model.observation_space,
                model.action_space,
                device=model.device,
                gamma=model.gamma,
                gae_lambda=model.gae_lambda,
                n_envs=model.n_envs,
            )
        model.learn(
            steps,
            reset_num_timesteps=False,
            callback=CallbackList([SchedCallback(self.config.eval_keys()), StepCallback(self)]),
        )
        model.logger.dump()  # the train/ figures of this rollout, at its last step

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
    def eval_due(self) -> bool:
        """An evaluation is due at the start (none yet), once ``eval_every`` steps have passed
        since the last one, and at the end of every phase: all read from the committed state, so
        an evaluation cut short is done again on resume."""
        s = self.state
        if not s.evals:
            return True
        last = s.evals[-1]["steps"]
        return last < s.steps and (s.steps - last >= self.config.eval_every or s.in_phase == 0)

    def baseline_metrics(self) -> dict[str, dict[str, float]]:
        """Mean metrics over the held-out seeds (same scenario) of each baseline heuristic, and of
        each expert's ranking in the ordering seat with this run's components (``<expert>-seat``:
        where the cloned ordering agent starts from)."""
        c = self.config
        cfg = c.core_config()
        scen = cfg.scenario_obj()
        out = {
            name: _means(
                [
                    summarize(scenarios.simulate(scen, registry.make(name), s, borrowing=cfg.borrowing))
                    for s in c.eval_seeds
                ],
                c.eval_keys(),
            )
            for name in c.baselines
        }
        for seat in dict.fromkeys(lookahead.heuristic_of(e) for e in c.experts):  # a lookahead's base
            runs = [run_episode(cfg, s, seat, None, c.max_jobs) for s in c.eval_seeds]
            out[f"{seat}-seat"] = _means(runs, c.eval_keys())
        return out

    def evaluate(self) -> dict[str, Any]:
        """Both agents, deterministic, on the held-out seeds, committed (with the best checkpoints
        if they improved), then logged under eval/ with the baselines."""
        c = self.config
        if not hasattr(self, "_baselines"):
            self._baselines = self.baseline_metrics()
        cfg = c.core_config()
        runs = [run_episode(cfg, s, self.ordering, self.placement, c.max_jobs) for s in c.eval_seeds]
        agent = _means(runs, c.eval_keys())
        step = self.state.steps
        entry = {"steps": step, "agent": agent, "baselines": self._baselines}
        # the figures count finished jobs only: a checkpoint that leaves jobs unfinished is never the best
        improved = agent["jobs_unfinished"] == 0 and c.better(agent[c.figure], self.state.best)
        rundir.pause_point("eval")
        blobs = {best(a): _blob(self.model(a)) for a in AGENTS} if improved else {}
        top = agent[c.figure] if improved else self.state.best
        self._commit(blobs=blobs, evals=[*self.state.evals, entry], best=top)
        logger = self.ordering.logger
        for k, v in agent.items():
            logger.record(f"eval/{k}/agent", v)
        for name, metrics in self._baselines.items():
            for k, v in metrics.items():
                logger.record(f"eval/{k}/{name}", v)
        if self.state.best is not None:
            logger.record(c.best_tag(), self.state.best)
        logger.dump()
        log.info("eval at %d steps: agent %s %g", step, c.figure, agent[c.figure])
        self.on_eval(entry)
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

    def _write_hparams(self) -> None:
        """The run's one hparams record and hyper-parameter table (:func:`hparams_events`), in
        tb/ordering/:data:`HPARAMS_FILE`, (re)written whole: a new run's, and each resume's
        (whose config may have changed)."""
        assert self.dir is not None
        atomic_write(self.dir / "tb" / ORDERING / HPARAMS_FILE, hparams_events(self.config))


class GlobalStepLogger(Logger):
    """SB3's Logger that writes every dump at ``step()`` (the run's global step), whatever step its
    caller (SB3 dumps at the agent's own step count) gives."""

    def __init__(self, folder: str, output_formats: list[KVWriter], step: Callable[[], int]) -> None:
        super().__init__(folder, output_formats)
        self._step = step

    def dump(self, step: int = 0) -> None:
        super().dump(self._step())


class SchedCallback(BaseCallback):
    """sched/ scalars of ``keys`` from every finished episode's metrics (averaged per rollout)."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        super().__init__()
        self.keys = keys

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", []):
            metrics = info.get("metrics")
            if metrics:
                for k in self.keys:
                    if metrics.get(k) is not None:
                        self.logger.record_mean(f"sched/{k}", metrics[k])
        return True


class StepCallback(BaseCallback):
    """Reports each step to the run's progress (and to the test hook ``rollout``)."""

    def __init__(self, trainer: Trainer) -> None:
        super().__init__()
        self.trainer = trainer

    def _on_step(self) -> bool:
        self.trainer._pending += self.training_env.num_envs
        self.trainer.progress(self.training_env.num_envs)
        rundir.pause_point("rollout")
        return True
