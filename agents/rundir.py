"""Run folders: ``runs/<scenario>__<exp>__<seed>__<time>/`` with the resolved config.yaml, the
command line, the git commit, tb/ (TensorBoard), checkpoints/ and state.json. A run folder is
enough to resume training or to evaluate the agents it holds."""

from __future__ import annotations

import dataclasses
import json
import time
import typing
from pathlib import Path
from typing import Any

import yaml

from agents.dual import TrainConfig
from agents.evaluation import git_commit
from envs.sim.config import ConfigError
from envs.sim.fileio import atomic_write


class RunDirError(ValueError):
    """A run folder that cannot be used (missing, or not a training run)."""


def new_run_dir(config: TrainConfig, root: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = f"{config.scenario if not config.trace else 'trace'}__{config.exp}__{config.seed}__{stamp}"
    path = root / name
    n = 1
    while path.exists():
        n += 1
        path = root / f"{name}-{n}"
    path.mkdir(parents=True)
    return path


def write_run_files(run: Path, config: TrainConfig, command: list[str], layout: dict[str, int]) -> None:
    """config.yaml, command.txt, commit.txt and layout.json (the agents' observation layout:
    ``obs_version``, ``max_jobs``, ``ordering_obs_dim``, ``num_servers``, ``placement_obs_dim``)."""
    atomic_write(run / "config.yaml", yaml.safe_dump(to_plain(config), sort_keys=False))
    atomic_write(run / "command.txt", " ".join(command) + "\n")
    atomic_write(run / "commit.txt", git_commit() + "\n")
    atomic_write(run / "layout.json", json.dumps(layout, indent=2) + "\n")


def load_layout(run: Path) -> dict[str, int]:
    path = run / "layout.json"
    if not path.exists():
        raise RunDirError(f"{run}: not a training run folder (it has no layout.json).")
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, TypeError) as e:
        raise RunDirError(f"{path}: not valid JSON ({e}).") from None


def to_plain(config: TrainConfig) -> dict[str, Any]:
    out = dataclasses.asdict(config)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def load_config(run: Path) -> TrainConfig:
    """The config a run was trained with (config.yaml)."""
    path = run / "config.yaml"
    if not run.is_dir():
        raise RunDirError(f"{run}: no such run folder.")
    if not path.exists():
        raise RunDirError(f"{run}: not a training run folder (it has no config.yaml).")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise RunDirError(f"{path}: not valid YAML ({e}).") from None
    if not isinstance(raw, dict):
        raise RunDirError(f"{path}: expected a mapping of settings.")
    return from_plain(raw, str(path))


def from_plain(raw: dict[str, Any], where: str) -> TrainConfig:
    hints = typing.get_type_hints(TrainConfig)
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = set(raw) - names
    if unknown:
        raise RunDirError(f"{where}: unknown settings {', '.join(sorted(unknown))}.")
    raw = {"activation": "tanh", **raw}  # run folders from before the setting trained tanh networks
    values: dict[str, Any] = {}
    for k, v in raw.items():
        origin = typing.get_origin(hints[k])
        values[k] = tuple(v) if origin is tuple and isinstance(v, list) else v
    try:
        return TrainConfig(**values)
    except TypeError as e:
        raise ConfigError(f"{where}: {e}.") from None
