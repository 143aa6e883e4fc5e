"""Trained agents, for evaluation: ``ppo:RUN``, the agents of a train.py run folder (components,
job slots, reward and checkpoints from config.yaml, layout.json and checkpoints/), and
``dagger:FOLDER``, a deviation agent (``agents/deviation.py``: a heuristic in every seat that gives
way in the ordering seat where its network predicts a better option), each -> :class:`AgentSpec`;
the observation-layout check against the envs built for a scenario, and one deterministic episode
with the agents in their seats of :class:`envs.core.Core` (:func:`episode`).

torch, sb3 and the RL envs are imported only when an agent is used.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from envs.core import Components
from envs.sim.config import ConfigError
from envs.sim.engine import SimResult

AGENT_PREFIX, DAGGER_PREFIX = "ppo:", "dagger:"
#: the files of each agent, by digest: (ordering .zip, placement .zip), or a deviation agent's
#: (network.pt, agent.json)
Models = Mapping[str, tuple[bytes, bytes]]


def is_agent(policy: str) -> bool:
    """Whether ``policy`` names a trained agent (``ppo:RUN`` or ``dagger:FOLDER``), not a heuristic."""
    return policy.startswith((AGENT_PREFIX, DAGGER_PREFIX))


def agent_label(policy: str) -> str:
    """The name in results of agent ``policy``: its prefix and its folder's name."""
    prefix = DAGGER_PREFIX if policy.startswith(DAGGER_PREFIX) else AGENT_PREFIX
    return prefix + Path(policy.removeprefix(prefix)).resolve().name


@dataclass(frozen=True)
class AgentSpec:
    """The trained agents of one run folder, and how they were trained.

    :param run: the run folder as given; ``label``: ``ppo:<folder name>`` (``dagger:<folder
        name>``), the policy's name in results; ``checkpoints``: the (ordering, placement) files
        used; ``digest``: SHA-1 of both.
    :param max_jobs: job slots of the ordering agent; ``num_servers``: servers the placement agent
        was trained for; the other fields are the run's heuristic components and reward.
    :param kind: ``ppo`` (a run folder's agents) or ``dagger`` (a deviation agent: its
        ``checkpoints`` are network.pt and agent.json, no placement agent, its base heuristic in
        every seat)."""

    run: str
    label: str
    checkpoints: tuple[str, str]
    digest: str
    max_jobs: int
    num_servers: int
    components: Components
    reward: str
    kind: str = "ppo"

    @property
    def paths(self) -> tuple[Path, Path]:
        """Where the two ``checkpoints`` are."""
        folder = Path(self.run) if self.kind == "dagger" else Path(self.run) / "checkpoints"
        return folder / self.checkpoints[0], folder / self.checkpoints[1]

    def core_kwargs(self, scenario: str, overrides: tuple[tuple[str, str], ...]) -> dict[str, Any]:
        return dict(scenario=scenario, overrides=dict(overrides), components=self.components, reward=self.reward)


def load_agent(spec: str) -> AgentSpec:
    """``ppo:RUN`` -> the run's agents (best checkpoints, else latest, of the run's last commit:
    :func:`agents.rundir.checkpoint_files`); ``dagger:FOLDER`` -> the deviation agent there. A
    missing or unusable folder is a ConfigError."""
    if spec.startswith(DAGGER_PREFIX):
        return _load_dagger(Path(spec.removeprefix(DAGGER_PREFIX)))
    from agents.rundir import RunDirError, checkpoint_files, load_config, load_layout
    from envs.obs import OBS_VERSION

    path = Path(spec.removeprefix(AGENT_PREFIX))
    try:
        config = load_config(path, validate=False)
        layout = load_layout(path)
        committed = checkpoint_files(path)
    except RunDirError as e:
        raise ConfigError(str(e)) from None
    if layout.get("obs_version") != OBS_VERSION:
        raise ConfigError(
            f"{path}: its agents were trained for observation layout {layout.get('obs_version')}, "
            f"this code builds layout {OBS_VERSION}; retrain them."
        )
    if layout.get("max_jobs") != config.max_jobs:
        raise ConfigError(
            f"{path}: layout.json says {layout.get('max_jobs')} job slots but config.yaml {config.max_jobs}."
        )
    files = []
    for seat in ("ordering", "placement"):
        found = [committed[p] for p in (f"{seat}_best.zip", f"{seat}_latest.zip") if p in committed]
        found = [f for f in found if f.is_file()]
        if not found:
            raise ConfigError(f"{path}: no checkpoints/{seat}_best.zip or {seat}_latest.zip.")
        files.append(found[0].name)  # its staged name while a save is finishing (agents.rundir)
    digest = hashlib.sha1(b"".join(file_digest(path / "checkpoints" / f).encode() for f in files)).hexdigest()
    agent = AgentSpec(
        run=str(path),
        label=agent_label(spec),
        checkpoints=(files[0], files[1]),
        digest=digest,
        max_jobs=config.max_jobs,
        num_servers=int(layout.get("num_servers", -1)),
        components=config.components,
        reward=config.reward,
    )
    _check_loads(agent, layout)
    return agent


def _load_dagger(path: Path) -> AgentSpec:
    """The deviation agent of ``path`` (read and loaded now, kept for this process)."""
    from agents import deviation

    files = (deviation.NETWORK_FILE, deviation.AGENT_FILE)
    missing = [f for f in files if not (path / f).is_file()]
    if missing:
        raise ConfigError(f"{path}: no {' or '.join(missing)}; is it a folder that dagger.py --save wrote?")
    blobs = ((path / files[0]).read_bytes(), (path / files[1]).read_bytes())
    loaded = _parse_dagger(path, blobs)
    digest = hashlib.sha1(b"".join(hashlib.sha1(b).hexdigest().encode() for b in blobs)).hexdigest()
    _LOADED[digest] = (loaded, None)
    return AgentSpec(
        run=str(path),
        label=agent_label(DAGGER_PREFIX + str(path)),
        checkpoints=files,
        digest=digest,
        max_jobs=loaded.max_jobs,
        num_servers=-1,
        components=Components(*[loaded.base] * len(Components.SEATS)),
        reward="jct",
        kind="dagger",
    )


def _parse_dagger(path: Path, blobs: tuple[bytes, bytes]) -> Any:
    import torch as th

    from agents.deviation import parse

    th.set_num_threads(1)
    return parse(path, blobs[1], blobs[0])


def _check_loads(agent: AgentSpec, layout: Mapping[str, Any]) -> None:
    """Load both checkpoints now (and keep them for this process): one that this code cannot
    load, or whose observation size is not the one in layout.json, is a user error."""
    import torch as th
    from sb3_contrib import MaskablePPO

    th.set_num_threads(1)  # before any op: a process pool forked from here starts no thread pools
    ck = Path(agent.run) / "checkpoints"
    models = []
    for name, key in zip(agent.checkpoints, ("ordering_obs_dim", "placement_obs_dim"), strict=True):
        try:
            model = MaskablePPO.load(ck / name, device="cpu")
        except Exception as e:  # any failure to load means the checkpoint is unusable here
            first = str(e).strip().splitlines()[0].rstrip(":") if str(e).strip() else type(e).__name__
            raise ConfigError(
                f"{agent.run}: checkpoints/{name} does not load with this code ({first}); retrain the agents."
            ) from None
        if _dim(model.observation_space) != layout.get(key):
            raise ConfigError(
                f"{agent.run}: checkpoints/{name} takes observations of size {_dim(model.observation_space)} "
                f"but layout.json says {key} {layout.get(key)}."
            )
        models.append(model)
    _LOADED[agent.digest] = (models[0], models[1])


def check_agent(agent: AgentSpec, scenario: str, overrides: tuple[tuple[str, str], ...]) -> None:
    """Raise ConfigError if the envs built for this scenario do not match the run's layout.json
    (job slots and observation sizes; a placement agent for another cluster size is not an error:
    it is replaced by the placement heuristic, see :func:`episode`). A deviation agent's
    observation is the same on every scenario (:data:`agents.deviation.FEATURES`)."""
    if agent.kind == "dagger":
        return
    from agents.rundir import load_layout
    from envs.ordering import OrderingEnv
    from envs.placement import PlacementEnv

    layout = load_layout(Path(agent.run))
    kw = agent.core_kwargs(scenario, overrides)
    dims = {"ordering_obs_dim": _dim(OrderingEnv(max_jobs=agent.max_jobs, **kw).observation_space)}
    pe = PlacementEnv(ordering=agent.components.placement, **kw)
    if pe.num_servers == layout.get("num_servers"):
        dims["placement_obs_dim"] = _dim(pe.observation_space)
    for k, v in dims.items():
        if layout.get(k) != v:
            raise ConfigError(
                f"{agent.run}: its agents were trained for {k} {layout.get(k)}, "
                f"but scenario '{scenario}' builds {v}; retrain them for this layout."
            )


def _dim(space: Any) -> int:
    return int(np.prod(space.shape))


def model_bytes(agents: Sequence[AgentSpec]) -> dict[str, tuple[bytes, bytes]]:
    """The checkpoint files of each agent pair, read once by the driver and shipped to workers
    (so that Ray workers on other machines need no copy of the run folder)."""
    return {a.digest: (a.paths[0].read_bytes(), a.paths[1].read_bytes()) for a in agents}


_LOADED: dict[str, tuple[Any, Any]] = {}


def load_models(agent: AgentSpec, models: Models | None) -> tuple[Any, Any]:
    """(ordering, placement) MaskablePPO models, or (the deviation agent, None), loaded once per
    process (one torch thread)."""
    import torch as th

    th.set_num_threads(1)
    if agent.digest not in _LOADED:
        from sb3_contrib import MaskablePPO

        blobs = models[agent.digest] if models and agent.digest in models else model_bytes([agent])[agent.digest]
        if agent.kind == "dagger":
            _LOADED[agent.digest] = (_parse_dagger(Path(agent.run), blobs), None)
        else:
            _LOADED[agent.digest] = tuple(MaskablePPO.load(io.BytesIO(b), device="cpu") for b in blobs)  # type: ignore[assignment]
    return _LOADED[agent.digest]


def file_digest(path: Path) -> str:
    h = hashlib.sha1()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def episode(
    agent: AgentSpec,
    scenario: str,
    overrides: tuple[tuple[str, str], ...],
    seed: int,
    models: Models | None = None,
    borrowing: bool | None = None,
) -> tuple[SimResult, list[str]]:
    """One episode of ``agent`` on the scenario (with overrides) for ``seed``, and its notes: if
    the cluster has another number of servers than the placement agent was trained for, the run's
    placement heuristic places instead (ours). ``borrowing``: see ``scenarios.build``."""
    from agents.partners import play_episode
    from envs.core import CoreConfig
    from envs.sim import scenarios
    from envs.sim.scenarios.base import servers_of

    notes: list[str] = []
    ordering, placement = load_models(agent, models)
    kw = dict(agent.core_kwargs(scenario, overrides), series=True, borrowing=borrowing)
    if agent.kind == "dagger":
        from envs.ordering import OrderingEnv

        env = OrderingEnv(max_jobs=agent.max_jobs, **kw)
        ordering.play(env, seed)
        assert env.core.result is not None
        return env.core.result, notes
    servers = len(servers_of(scenarios.get(scenario, dict(overrides)).cluster))
    if servers != agent.num_servers:
        placement = None
        notes.append(
            f"placement by heuristic '{agent.components.placement}': the scenario has {servers} servers, "
            f"the placement agent was trained for {agent.num_servers}"
        )
    result = play_episode(CoreConfig.from_kwargs(**kw), seed, ordering, placement, agent.max_jobs).result
    assert result is not None
    return result, notes
