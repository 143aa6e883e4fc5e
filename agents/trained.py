"""Trained agents of a train.py run folder, for evaluation: ``ppo:RUN`` -> :class:`AgentSpec`
(components, job slots, reward and checkpoints from config.yaml, layout.json and checkpoints/),
the observation-layout check against the envs built for a scenario, and one deterministic episode
with both agents in their seats of :class:`envs.core.Core` (:func:`episode`).

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

AGENT_PREFIX = "ppo:"
#: checkpoint bytes of each agent pair, by digest: (ordering .zip, placement .zip)
Models = Mapping[str, tuple[bytes, bytes]]


@dataclass(frozen=True)
class AgentSpec:
    """The trained agents of one run folder, and how they were trained.

    :param run: the run folder as given; ``label``: ``ppo:<folder name>``, the policy's name in
        results; ``checkpoints``: the (ordering, placement) files used; ``digest``: SHA-1 of both.
    :param max_jobs: job slots of the ordering agent; ``num_servers``: servers the placement agent
        was trained for; the other fields are the run's heuristic components and reward."""

    run: str
    label: str
    checkpoints: tuple[str, str]
    digest: str
    max_jobs: int
    num_servers: int
    components: Components
    reward: str

    def core_kwargs(self, scenario: str, overrides: tuple[tuple[str, str], ...]) -> dict[str, Any]:
        return dict(scenario=scenario, overrides=dict(overrides), components=self.components, reward=self.reward)


def load_agent(spec: str) -> AgentSpec:
    """``ppo:RUN`` -> the run's agents (best checkpoints, else latest, of the run's last commit:
    :func:`agents.rundir.checkpoint_files`); a missing or unusable run folder is a ConfigError."""
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
        label=AGENT_PREFIX + path.resolve().name,
        checkpoints=(files[0], files[1]),
        digest=digest,
        max_jobs=config.max_jobs,
        num_servers=int(layout.get("num_servers", -1)),
        components=config.components,
        reward=config.reward,
    )
    _check_loads(agent, layout)
    return agent


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
    it is replaced by the placement heuristic, see :func:`episode`)."""
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
    out = {}
    for a in agents:
        ck = Path(a.run) / "checkpoints"
        out[a.digest] = ((ck / a.checkpoints[0]).read_bytes(), (ck / a.checkpoints[1]).read_bytes())
    return out


_LOADED: dict[str, tuple[Any, Any]] = {}


def load_models(agent: AgentSpec, models: Models | None) -> tuple[Any, Any]:
    """(ordering, placement) MaskablePPO models, loaded once per process (one torch thread)."""
    import torch as th

    th.set_num_threads(1)
    if agent.digest not in _LOADED:
        from sb3_contrib import MaskablePPO

        blobs = models[agent.digest] if models and agent.digest in models else model_bytes([agent])[agent.digest]
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

    notes = []
    ordering, placement = load_models(agent, models)
    servers = len(servers_of(scenarios.get(scenario, dict(overrides)).cluster))
    if servers != agent.num_servers:
        placement = None
        notes.append(
            f"placement by heuristic '{agent.components.placement}': the scenario has {servers} servers, "
            f"the placement agent was trained for {agent.num_servers}"
        )
    config = CoreConfig.from_kwargs(**agent.core_kwargs(scenario, overrides), series=True, borrowing=borrowing)
    result = play_episode(config, seed, ordering, placement, agent.max_jobs).result
    assert result is not None
    return result, notes
