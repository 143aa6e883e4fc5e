"""Expert demonstrations: record a heuristic in an RL env, store them as a versioned ``.npz``, load them back.

A demo dataset is one ``numpy.savez_compressed`` archive that ``numpy.load(path, allow_pickle=False)``
reads with numpy alone (no pickle, no torch). Its steps are in recording order, episode after
episode; N is the number of steps (every episode of every expert in the file).

| array | dtype | shape | meaning |
|---|---|---|---|
| ``obs`` | float32 | N x obs_dim | the observation the expert acted on |
| ``actions`` | int64 | N | the expert's action |
| ``action_masks`` | bool | N x n_actions | the env's action mask at that step (it allows the action) |
| ``rewards`` | float32 | N | the reward ``step(action)`` returned |
| ``episode_starts`` | bool | N | True on the first step of each episode |
| ``episode_ids`` | int64 | N | the step's episode: non-decreasing, distinct per episode within a file |
| ``expert_ids`` | int64 | N | the acting expert, an index into ``meta["experts"]`` |
| ``meta`` | unicode string | () | JSON, the keys below; ``json.loads(str(npz["meta"]))`` |

| meta key | meaning |
|---|---|
| ``format`` | ``"loangym-demos"`` |
| ``version`` | the format version, :data:`DEMOS_VERSION`; a loader refuses any other |
| ``env_id`` | the Gymnasium id the demos were recorded in, e.g. ``"loangym/Ordering-v1"`` |
| ``obs_version`` | the observation layout version of the env (``envs.obs.OBS_VERSION``) |
| ``obs_dim``, ``n_actions`` | the sizes of the observation vector and of the action space |
| ``experts`` | names of the experts (component heuristics); ``expert_ids`` index this list |
| ``sources`` | one entry per recording run (several after a merge), the keys below |
| ``sources[i].expert`` | the heuristic that acted |
| ``sources[i].env_kwargs`` | ``gymnasium.make(env_id, **env_kwargs)`` rebuilds the env (scenario, components...) |
| ``sources[i].scenario`` | the scenario's name (``"trace"`` when a trace was replayed) |
| ``sources[i].episodes`` | one entry per episode, the keys below |
| ``sources[i].commit`` | the code's git commit (``+dirty`` with uncommitted changes) |
| ``sources[i].command`` | the command line that created it |

| episode key | meaning |
|---|---|
| ``id`` | its value in ``episode_ids`` |
| ``seed`` | the scenario seed it ran on |
| ``steps`` | its rows in the arrays |
| ``episode_return`` | the sum of its rewards (summed in float64, before the cast to float32) |
| ``terminated`` | true when every job finished; false when the env truncated it (horizon reached first) |
| ``metrics`` | the final ``info["metrics"]`` (``envs.sim.metrics``) without the wall-clock ``TIMING_KEYS`` |

An episode is replayed with ``env.reset(seed=seed, options={"scenario_seed": seed})`` and its
recorded actions: it reproduces ``obs``, ``action_masks`` and ``rewards`` exactly. An episode
with no decision (every choice forced) has a record in ``meta`` and no rows.

(ours) Episode ``i`` of a recording uses scenario seed ``seed + i``: one ``--seed`` fixes every
episode, and ranges are easy to keep apart from evaluation seeds. No time is recorded, so the
same recording gives the same arrays and the same meta (bar ``commit``/``command``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import envs  # noqa: F401  (registers the env ids)
from agents.provenance import git_commit
from envs import lookahead
from envs.core import REWARDS, Components, CoreConfig, composed
from envs.sim import scenarios
from envs.sim.config import ConfigError
from envs.sim.fileio import atomic_open
from envs.sim.metrics import TIMING_KEYS

log = logging.getLogger(__name__)

FORMAT = "loangym-demos"
DEMOS_VERSION = 1
ENVS = {"ordering": "loangym/Ordering-v1", "placement": "loangym/Placement-v1"}
"""``--env`` name -> Gymnasium id."""
EXPERT = "expert"
"""A component set to this takes the expert's own heuristic."""
NONE = "none"
"""``preemption`` set to this: no preemption component."""

#: array -> (dtype, number of dimensions)
ARRAYS: dict[str, tuple[type, int]] = {
    "obs": (np.float32, 2),
    "actions": (np.int64, 1),
    "action_masks": (np.bool_, 2),
    "rewards": (np.float32, 1),
    "episode_starts": (np.bool_, 1),
    "episode_ids": (np.int64, 1),
    "expert_ids": (np.int64, 1),
}


class DemoError(ValueError):
    """A demo file that cannot be used: one sentence naming the file and the problem."""


# ---------------------------------------------------------------------- the format
@dataclass(frozen=True)
class EpisodeRecord:
    """One recorded episode (see the module docstring's ``sources[i].episodes``)."""

    id: int
    seed: int
    steps: int
    episode_return: float
    terminated: bool
    metrics: dict[str, float | int | None]


@dataclass(frozen=True)
class Source:
    """One recording run: an expert, the env it acted in, its episodes."""

    expert: str
    env_kwargs: dict[str, Any]
    scenario: str
    episodes: tuple[EpisodeRecord, ...]
    commit: str
    command: tuple[str, ...]


@dataclass(frozen=True)
class DemoMeta:
    """The ``meta`` entry of a demo file."""

    env_id: str
    obs_version: int
    obs_dim: int
    n_actions: int
    experts: tuple[str, ...]
    sources: tuple[Source, ...]
    version: int = DEMOS_VERSION

    def to_json(self) -> str:
        doc = dataclasses.asdict(self)
        return json.dumps({"format": FORMAT, "version": doc.pop("version"), **doc})

    @staticmethod
    def from_json(doc: dict[str, Any]) -> DemoMeta:
        """The inverse of :meth:`to_json` (after ``json.loads``); KeyError / TypeError if malformed."""
        fields = {k: v for k, v in doc.items() if k != "format"}
        sources = tuple(
            Source(**s | {"episodes": tuple(EpisodeRecord(**e) for e in s["episodes"]), "command": tuple(s["command"])})
            for s in doc["sources"]
        )
        return DemoMeta(**fields | {"experts": tuple(doc["experts"]), "sources": sources})


@dataclass(frozen=True)
class Demos:
    """A demo dataset in memory: the arrays of the module docstring and their meta."""

    obs: np.ndarray
    actions: np.ndarray
    action_masks: np.ndarray
    rewards: np.ndarray
    episode_starts: np.ndarray
    episode_ids: np.ndarray
    expert_ids: np.ndarray
    meta: DemoMeta

    def __len__(self) -> int:
        return len(self.actions)

    @property
    def episodes(self) -> list[EpisodeRecord]:
        """Every episode's record, in file order."""
        return [e for s in self.meta.sources for e in s.episodes]

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in ARRAYS}


@dataclass(frozen=True)
class ExpertSummary:
    """What the CLI prints per expert."""

    expert: str
    episodes: int
    steps: int
    mean_return: float | None
    mean_avg_jct_s: float | None


def summaries(demos: Demos) -> list[ExpertSummary]:
    """Per expert (in ``meta.experts`` order): episodes, steps, mean return, mean final avg_jct_s."""
    out = []
    for name in demos.meta.experts:
        eps = [e for s in demos.meta.sources if s.expert == name for e in s.episodes]
        jcts = [e.metrics.get("avg_jct_s") for e in eps]
        known = [float(j) for j in jcts if j is not None]
        out.append(
            ExpertSummary(
                name,
                len(eps),
                sum(e.steps for e in eps),
                sum(e.episode_return for e in eps) / len(eps) if eps else None,
                sum(known) / len(known) if known else None,
            )
        )
    return out


# ---------------------------------------------------------------------- recording
@dataclass(frozen=True)
class RecordConfig:
    """One expert's recording.

    :param expert: a component heuristic (``fifo``, ``sjf``, ``aryl``, ...): in the ordering env
        its ordering picks the jobs, in the placement env its placement picks the servers.
    :param env: ``ordering`` or ``placement`` (see :data:`ENVS`).
    :param scenario: scenario name; ``overrides``: its ``--set`` pairs; ``trace``: a CSV to replay
        (implies the ``trace`` scenario).
    :param episodes: how many episodes; episode ``i`` uses scenario seed ``seed + i`` (ours).
    :param max_jobs: the ordering env's job slots K (None: the env's default); the expert sees
        only those, so it equals its heuristic exactly while no more than K jobs wait.
    :param ordering: the placement env's ordering component (``expert``: the expert's own).
    :param components: the components no agent controls (``expert`` in a seat: the expert's own,
        so the expert reproduces its heuristic; the preemption seat may be ``none``). In the
        placement env the placement seat is the expert itself.
    :param reward: the env's reward by name (``envs.core.REWARDS``).
    :param command: the command line that asked for it, recorded in the meta.
    """

    expert: str
    env: str = "ordering"
    scenario: str = "default"
    overrides: tuple[tuple[str, str], ...] = ()
    trace: str | None = None
    episodes: int = 20
    seed: int = 0
    max_jobs: int | None = None
    ordering: str = EXPERT
    components: Components = field(default_factory=lambda: Components(EXPERT, EXPERT, EXPERT, EXPERT))
    reward: str = "jct"
    command: tuple[str, ...] = ()

    @property
    def env_id(self) -> str:
        return ENVS[self.env]

    def seeds(self) -> list[int]:
        return list(range(self.seed, self.seed + self.episodes))

    def _component(self, value: str) -> str:
        return lookahead.heuristic_of(self.expert) if value == EXPERT else value

    def resolved(self) -> Components:
        """The components with ``expert`` replaced by the expert and ``none`` by no preemption."""
        c = self.components
        pre = c.preemption
        return Components(
            self._component(c.placement),
            self._component(c.scaling),
            self._component(c.reclaim),
            None if pre in (None, NONE) else self._component(pre),
        )

    def env_kwargs(self) -> dict[str, Any]:
        """The ``gymnasium.make`` keyword arguments of the env (``max_jobs`` only when given)."""
        kw: dict[str, Any] = {
            "scenario": "trace" if self.trace else self.scenario,
            "overrides": dict(self.overrides),
            "trace": self.trace,
            "components": dataclasses.asdict(self.resolved()),  # JSON-ready, as the meta keeps it
            "reward": self.reward,
        }
        if self.env == "placement":
            kw["ordering"] = self._component(self.ordering)
        elif self.max_jobs is not None:
            kw["max_jobs"] = self.max_jobs
        return kw

    def validate(self) -> None:
        """Raise the user's error (ConfigError, TraceError, InferenceConfigError) before anything runs."""
        if self.env not in ENVS:
            raise ConfigError(f"unknown env '{self.env}'; valid envs: {', '.join(ENVS)}.")
        if self.episodes < 1:
            raise ConfigError(f"--episodes must be at least 1, got {self.episodes}.")
        if self.seed < 0:
            raise ConfigError(f"--seed must be a non-negative integer, got {self.seed}.")
        composed(lookahead.heuristic_of(self.expert))
        if self.env == "placement" and lookahead.base_of(self.expert):
            raise ConfigError(f"expert '{self.expert}' (a lookahead) teaches the ordering env only.")
        if self.env == "ordering" and self.ordering not in (EXPERT, self.expert):
            raise ConfigError("in the ordering env the expert is the ordering: --ordering applies to --env placement.")
        if self.env == "placement":
            if self.components.placement not in (EXPERT, self.expert):
                raise ConfigError(
                    "in the placement env the expert is the placement: --placement applies to --env ordering."
                )
            if self.max_jobs is not None:
                raise ConfigError("--max-jobs (job slots) applies to --env ordering only.")
            composed(self._component(self.ordering))
        if self.max_jobs is not None and self.max_jobs < 1:
            raise ConfigError(f"--max-jobs must be at least 1, got {self.max_jobs}.")
        if self.reward not in REWARDS:
            raise ConfigError(f"unknown reward '{self.reward}'; valid rewards: {', '.join(REWARDS)}.")
        kw = {k: v for k, v in self.env_kwargs().items() if k not in ("ordering", "max_jobs")}
        core = CoreConfig.from_kwargs(**kw)  # scenario, overrides and components
        scenarios.build(core.scenario_obj(), self.seed)  # a bad trace or inference curve shows here


def record(config: RecordConfig, on_episode: Callable[[EpisodeRecord], None] | None = None) -> Demos:
    """Run ``config.expert`` for ``config.episodes`` episodes and return what it saw and did."""
    config.validate()
    kwargs = config.env_kwargs()
    env: Any = gym.make(config.env_id, **kwargs).unwrapped
    if config.env == "ordering":
        kwargs["max_jobs"] = env.slots  # the resolved default, so the meta rebuilds the same env

        def expert() -> int:
            return int(env.expert_action(config.expert))

    else:

        def expert() -> int:
            return int(env.expert_action())

    obs_rows: list[np.ndarray] = []
    actions: list[int] = []
    masks: list[np.ndarray] = []
    rewards: list[float] = []
    ids: list[int] = []
    episodes: list[EpisodeRecord] = []
    for eid, seed in enumerate(config.seeds()):
        obs, info = env.reset(seed=seed, options={"scenario_seed": seed})
        steps, ret = 0, 0.0
        while "metrics" not in info:  # the env puts the episode's summary in its last info
            a = expert()
            obs_rows.append(np.array(obs, dtype=np.float32))
            masks.append(np.array(info["action_mask"], dtype=bool))
            actions.append(a)
            ids.append(eid)
            obs, r, _, _, info = env.step(a)
            rewards.append(r)
            ret += float(r)
            steps += 1
        metrics = {k: v for k, v in info["metrics"].items() if k not in TIMING_KEYS}
        ep = EpisodeRecord(eid, seed, steps, ret, not env.core.truncated, metrics)
        log.info("%s: episode %d (seed %d): %d steps, return %.4f", config.expert, eid, seed, steps, ret)
        episodes.append(ep)
        if on_episode is not None:
            on_episode(ep)

    n = len(actions)
    obs_dim = int(env.observation_space.shape[0])
    n_actions = int(env.action_space.n)
    id_arr = np.asarray(ids, dtype=np.int64)
    starts = np.ones(n, dtype=bool)
    starts[1:] = id_arr[1:] != id_arr[:-1]
    source = Source(config.expert, kwargs, str(kwargs["scenario"]), tuple(episodes), git_commit(), config.command)
    meta = DemoMeta(config.env_id, int(env.obs_version), obs_dim, n_actions, (config.expert,), (source,))
    return Demos(
        obs=np.asarray(obs_rows, dtype=np.float32).reshape(n, obs_dim),
        actions=np.asarray(actions, dtype=np.int64),
        action_masks=np.asarray(masks, dtype=bool).reshape(n, n_actions),
        rewards=np.asarray(rewards, dtype=np.float32),
        episode_starts=starts,
        episode_ids=id_arr,
        expert_ids=np.zeros(n, dtype=np.int64),
        meta=meta,
    )


# ---------------------------------------------------------------------- files
def save_demos(demos: Demos, path: str | os.PathLike[str]) -> Path:
    """Write ``demos`` to ``path`` atomically (a temporary file, then a rename)."""
    target = Path(path)
    entries: dict[str, Any] = {"meta": np.array(demos.meta.to_json()), **demos.arrays()}
    with atomic_open(target, "wb") as f:
        np.savez_compressed(f, **entries)
    return target


def output_paths(out: str | os.PathLike[str], experts: Sequence[str]) -> list[tuple[Path, tuple[str, ...]]]:
    """Where the experts' demos go (ours): ``out`` ending in ``.npz`` is one file holding every
    expert (``expert_ids`` tell them apart); anything else is a folder with ``<expert>.npz`` per
    expert. Raises ConfigError when the place cannot be written (nothing is created)."""
    base = Path(out)
    plan: list[tuple[Path, tuple[str, ...]]] = (
        [(base, tuple(experts))] if base.suffix == ".npz" else [(base / f"{e}.npz", (e,)) for e in experts]
    )
    for path, _ in plan:
        _check_writable(path)
    return plan


def _check_writable(path: Path) -> None:
    if path.is_dir():
        raise ConfigError(f"cannot write demos to '{path}': it is a folder.")
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise ConfigError(f"cannot write demos to '{path}': '{folder}' is not a folder.")
    try:  # a real probe: os.access says yes to root on a read-only file system
        fd, probe = tempfile.mkstemp(prefix=".demos-probe.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ConfigError(f"cannot write demos to '{path}': {e.strerror or e}.") from None


def load_demos(path: str | os.PathLike[str], env: Any = None) -> Demos:
    """Load and validate a demo file; with ``env`` (a Gymnasium env, wrapped or not) also check
    that it is the env the demos were recorded in (id, observation layout, sizes).

    :raises DemoError: one sentence naming the file and the problem.
    """
    p = Path(path)
    if not p.is_file():
        raise DemoError(f"demo file '{p}' does not exist{' (it is a folder)' if p.is_dir() else ''}.")
    try:
        data = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise DemoError(f"demo file '{p}' is not a .npz archive ({_reason(e)}).") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise DemoError(f"demo file '{p}' is a single .npy array, not a .npz demo archive.")
    with data:
        if "meta" not in data.files:
            raise DemoError(f"demo file '{p}' has no 'meta' entry, so it is not a loangym demo dataset.")
        try:
            meta_doc = json.loads(str(data["meta"][()]))
            arrays = {name: data[name] for name in ARRAYS if name in data.files}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
            raise DemoError(f"demo file '{p}' cannot be read ({_reason(e)}).") from None
    if not isinstance(meta_doc, dict) or meta_doc.get("format") != FORMAT:
        raise DemoError(f"demo file '{p}' is not a loangym demo dataset (its meta lacks format '{FORMAT}').")
    if meta_doc.get("version") != DEMOS_VERSION:
        raise DemoError(
            f"demo file '{p}' has demo format version {meta_doc.get('version')!r}; this code reads version "
            f"{DEMOS_VERSION} (record the demos again with this code)."
        )
    try:
        meta = DemoMeta.from_json(meta_doc)
    except (KeyError, TypeError, ValueError) as e:
        raise DemoError(f"demo file '{p}' has a malformed meta ({_reason(e)}).") from None
    missing = [name for name in ARRAYS if name not in arrays]
    if missing:
        raise DemoError(f"demo file '{p}' lacks the array(s) {', '.join(missing)}.")
    demos = Demos(**arrays, meta=meta)
    problem = _inconsistency(demos)
    if problem:
        raise DemoError(f"demo file '{p}' is inconsistent: {problem}.")
    if env is not None:
        check_env(demos, env, str(p))
    return demos


def _reason(e: BaseException) -> str:
    text = str(e).strip().rstrip(".")
    return text or type(e).__name__


def _inconsistency(d: Demos) -> str | None:
    """The first thing wrong with the arrays of ``d`` (against each other and the meta), or None."""
    m = d.meta
    for name, (dtype, ndim) in ARRAYS.items():
        a = getattr(d, name)
        if a.dtype != dtype or a.ndim != ndim:
            return f"array {name} is {a.dtype} with {a.ndim} dimension(s), expected {np.dtype(dtype)} with {ndim}"
    lengths = {name: len(getattr(d, name)) for name in ARRAYS}
    if len(set(lengths.values())) > 1:
        return "the arrays differ in length (" + ", ".join(f"{k} {v}" for k, v in lengths.items()) + ")"
    n = len(d)
    if d.obs.shape[1] != m.obs_dim or d.action_masks.shape[1] != m.n_actions:
        return (
            f"obs has {d.obs.shape[1]} columns and action_masks {d.action_masks.shape[1]}, "
            f"but the meta says obs_dim {m.obs_dim} and n_actions {m.n_actions}"
        )
    if n and (d.actions.min() < 0 or d.actions.max() >= m.n_actions):
        return f"an action lies outside [0, {m.n_actions})"
    if n and not d.action_masks[np.arange(n), d.actions].all():
        return f"step {int(np.flatnonzero(~d.action_masks[np.arange(n), d.actions])[0])}'s action is not in its mask"
    if n and (d.expert_ids.min() < 0 or d.expert_ids.max() >= len(m.experts)):
        return f"an expert id lies outside the {len(m.experts)} experts of the meta"
    changes = np.ones(n, dtype=bool)
    changes[1:] = d.episode_ids[1:] != d.episode_ids[:-1]
    if not np.array_equal(changes, d.episode_starts) or (np.diff(d.episode_ids) < 0).any():
        return "episode_starts does not mark exactly the steps where a (non-decreasing) episode id changes"
    steps = sum(e.steps for e in d.episodes)
    if steps != n:
        return f"the meta's episodes hold {steps} steps, the arrays {n}"
    return None


def env_id_of(env: Any) -> str | None:
    """The Gymnasium id of ``env`` (from its spec, else from its class's registered entry point)."""
    spec = getattr(env, "spec", None) or getattr(getattr(env, "unwrapped", env), "spec", None)
    if spec is not None:
        return str(spec.id)
    cls = type(getattr(env, "unwrapped", env))
    entry = f"{cls.__module__}:{cls.__name__}"
    return next((i for i in ENVS.values() if gym.registry[i].entry_point == entry), None)


def check_env(demos: Demos, env: Any, name: str = "demos") -> None:
    """Raise DemoError unless ``env`` is the env ``demos`` were recorded in."""
    m = demos.meta
    shape = getattr(env.observation_space, "shape", None) or (None,)
    have = {
        "env id": env_id_of(env),
        "observation layout version": getattr(getattr(env, "unwrapped", env), "obs_version", None),
        "obs_dim": None if shape[0] is None else int(shape[0]),
        "n_actions": None if getattr(env.action_space, "n", None) is None else int(env.action_space.n),
    }
    want = {
        "env id": m.env_id,
        "observation layout version": m.obs_version,
        "obs_dim": m.obs_dim,
        "n_actions": m.n_actions,
    }
    diff = [f"{k} {want[k]!r} in the file, {have[k]!r} in the env" for k in want if have[k] != want[k]]
    if diff:
        raise DemoError(f"demo file '{name}' does not match the env: {'; '.join(diff)}.")


# ---------------------------------------------------------------------- several files
def merge_demos(parts: Sequence[Demos], names: Sequence[str] | None = None) -> Demos:
    """Concatenate datasets of one env: episode ids are shifted so they stay distinct, expert ids
    are remapped onto the union of the experts (in order of first appearance)."""
    if not parts:
        raise DemoError("no demo datasets to merge.")
    labels = list(names) if names is not None else [f"dataset {i}" for i in range(len(parts))]
    first = parts[0].meta
    for label, d in zip(labels[1:], parts[1:], strict=True):
        for key in ("env_id", "obs_version", "obs_dim", "n_actions"):
            a, b = getattr(first, key), getattr(d.meta, key)
            if a != b:
                raise DemoError(
                    f"demo file '{label}' has {key} {b!r}, but '{labels[0]}' has {a!r}: they cannot be merged."
                )
    experts: list[str] = []
    for d in parts:
        experts += [e for e in d.meta.experts if e not in experts]
    arrays: dict[str, list[np.ndarray]] = {name: [] for name in ARRAYS}
    sources: list[Source] = []
    offset = 0
    for d in parts:
        remap = np.asarray([experts.index(e) for e in d.meta.experts], dtype=np.int64)
        shifted = d.arrays() | {"episode_ids": d.episode_ids + offset, "expert_ids": remap[d.expert_ids]}
        for name in ARRAYS:
            arrays[name].append(shifted[name])
        for s in d.meta.sources:
            eps = tuple(dataclasses.replace(e, id=e.id + offset) for e in s.episodes)
            sources.append(dataclasses.replace(s, episodes=eps))
        offset += 1 + max((e.id for e in d.episodes), default=-1)
    meta = dataclasses.replace(first, experts=tuple(experts), sources=tuple(sources))
    return Demos(**{name: np.concatenate(arrays[name]) for name in ARRAYS}, meta=meta)


def load_merged(paths: Sequence[str | os.PathLike[str]], env: Any = None) -> Demos:
    """Load several demo files (each validated, and checked against ``env`` when given) as one."""
    parts = [load_demos(p, env) for p in paths]
    return merge_demos(parts, [str(p) for p in paths])
