"""Run folders: ``runs/<scenario>__<exp>__<seed>__<time>/`` with the resolved config.yaml, the
command line, the git commit, layout.json, tb/ (TensorBoard), checkpoints/ and state.json. A run
folder is enough to resume training or to evaluate the agents it holds.

**state.json is the run's one commit point.** It holds the progress (:class:`agents.dual.TrainState`)
and the SHA-1 of each checkpoint that belongs to it: ``checkpoints/{ordering,placement}_latest.zip``
and, once an evaluation was the best, ``..._best.zip``. A commit (:func:`commit`)

1. writes the checkpoints that changed under staged names, ``checkpoints/.<name>.g<generation>.zip``,
   and syncs them to disk;
2. replaces state.json atomically; the new state.json names its staged files;
3. renames the staged files over the plain names.

So a kill at any point (SIGKILL included) leaves the previous commit (before step 2: the plain
files are still the previous state's) or the new one (after it: a checkpoint not yet renamed is
read under its staged name). Readers go through :func:`read_state` (training) or
:func:`checkpoint_files` (evaluation); :func:`settle` finishes the renames of a resumed folder and
deletes what an unfinished commit left. A folder from before this format (state.json with no
``version``) still evaluates, but is not resumed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import sys
import time
import typing
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from agents.provenance import git_commit
from envs.sim.config import ConfigError
from envs.sim.fileio import atomic_write

if TYPE_CHECKING:
    from agents.dual import TrainConfig, TrainState

STATE_VERSION = 3
"""3: ``best`` is the reward's figure at the best evaluation (2 named it ``best_jct``: avg JCT, whatever the reward)"""
CHECKPOINT_NAMES = tuple(f"{a}_{k}.zip" for a in ("ordering", "placement") for k in ("latest", "best"))
UNFINISHED_FILE = re.compile(r"\..+\.tmp")  # envs.sim.fileio.atomic_open's temporary files
UNFINISHED_CHECKPOINT = re.compile(r"\..+\.(g\d+\.zip|tmp|tmp\.zip)")  # staged; atomic_open's; older train.py's
STATE_KEYS = ("version", "generation", "phase", "in_phase", "steps", "best", "evals", "bc", "checkpoints", "staged")


class RunDirError(ValueError):
    """A run folder that cannot be used (missing, corrupt, inconsistent, or not a training run)."""


# ---------------------------------------------------------------------------------------------- test hook
PAUSE_ENV = "LOANGYM_TEST_PAUSE_AT"
_PAUSE = os.environ.get(PAUSE_ENV, "")
_arrivals: Counter[str] = Counter()


def pause_point(name: str) -> None:
    """Test hook: with ``LOANGYM_TEST_PAUSE_AT=<name>[@<n>]`` in the environment, the n-th arrival
    (default: the first) at point ``name`` writes ``paused at <name>`` to stderr and sleeps, so
    that a test can signal or kill the process exactly there. The points: ``bc:<agent>`` (cloned,
    not committed), ``rollout`` (each step of a rollout), ``eval`` (evaluated, not committed),
    ``save:staged`` (checkpoints written, state.json not replaced) and ``save:committed``
    (state.json replaced, checkpoints not renamed). Without the variable: nothing."""
    if not _PAUSE:
        return
    point, _, nth = _PAUSE.partition("@")
    if point != name:
        return
    _arrivals[name] += 1
    if _arrivals[name] == int(nth or 1):
        print(f"paused at {_PAUSE}", file=sys.stderr, flush=True)
        time.sleep(600)


# ---------------------------------------------------------------------------------------------- run files
def check_folder(path: Path, flag: str) -> None:
    """Raise RunDirError unless ``path`` is, or can be made, a writable folder."""
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    if not p.is_dir():
        raise RunDirError(f"{flag} {path}: {p} is a file, not a folder.")
    if not os.access(p, os.W_OK | os.X_OK):
        raise RunDirError(f"{flag} {path}: {p} is not writable.")


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
    """config.yaml, command.txt, commit.txt and layout.json (:func:`write_layout`)."""
    write_config(run, config)
    atomic_write(run / "command.txt", " ".join(command) + "\n")
    atomic_write(run / "commit.txt", git_commit() + "\n")
    write_layout(run, layout)


def write_layout(run: Path, layout: dict[str, int]) -> None:
    """layout.json: the agents' observation layout (``obs_version``, ``max_jobs``,
    ``ordering_obs_dim``, ``num_servers``, ``placement_obs_dim``)."""
    atomic_write(run / "layout.json", json.dumps(layout, indent=2) + "\n")


def load_layout(run: Path) -> dict[str, int]:
    path = run / "layout.json"
    if not path.exists():
        raise RunDirError(f"{run}: not a training run folder (it has no layout.json).")
    raw = _read_json(path)
    if not isinstance(raw, dict):
        raise RunDirError(f"{path}: expected a JSON object.")
    return dict(raw)


def check_layout(run: Path, layout: dict[str, int]) -> bool:
    """True if the run's layout.json is ``layout`` (what its config builds), False if it has
    none (resuming writes it again); a corrupt or different one raises RunDirError."""
    if not (run / "layout.json").exists():
        return False
    saved = load_layout(run)
    if saved != layout:
        diff = ", ".join(f"{k} {saved.get(k)} (config.yaml builds {v})" for k, v in layout.items() if saved.get(k) != v)
        raise RunDirError(f"{run / 'layout.json'}: says {diff or 'other keys'}; this folder cannot be resumed.")
    return True


def to_plain(config: TrainConfig) -> dict[str, Any]:
    return {k: _lists(v) for k, v in dataclasses.asdict(config).items()}


def _lists(v: Any) -> Any:
    """Tuples (nested too) as lists, for YAML."""
    return [_lists(x) for x in v] if isinstance(v, tuple | list) else v


def _tuples(v: Any) -> Any:
    """Lists (nested too) as tuples, as TrainConfig holds them."""
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def write_config(run: Path, config: TrainConfig) -> bool:
    """config.yaml of ``config``, written (atomically) if it says something else. True if it was."""
    path = run / "config.yaml"
    text = yaml.safe_dump(to_plain(config), sort_keys=False)
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    atomic_write(path, text)
    return True


def load_config(run: Path, validate: bool = True) -> TrainConfig:
    """The config a run was trained with (config.yaml), validated for training unless not
    ``validate`` (evaluation needs only its components: a trace it trained on may be elsewhere)."""
    path = run / "config.yaml"
    if not run.is_dir():
        raise RunDirError(f"{run}: no such run folder.")
    if not path.exists():
        raise RunDirError(f"{run}: not a training run folder (it has no config.yaml).")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise RunDirError(f"{path}: not valid YAML ({str(e).splitlines()[0]}).") from None
    if not isinstance(raw, dict):
        raise RunDirError(f"{path}: expected a mapping of settings.")
    config = from_plain(raw, str(path))
    if validate:
        config.validate(lambda f: f"{path}: setting '{f}'")
    return config


def from_plain(raw: dict[str, Any], where: str) -> TrainConfig:
    from agents.dual import TrainConfig
    from envs.core import Components

    hints = typing.get_type_hints(TrainConfig)
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    seats = {k: raw.pop(k) for k in Components.SEATS if k in raw}  # a config.yaml from before Components
    if seats:
        raw = {**raw, "components": {**dataclasses.asdict(TrainConfig().components), **seats}}
    unknown = set(raw) - names
    if unknown:
        raise RunDirError(f"{where}: unknown settings {', '.join(sorted(map(str, unknown)))}.")
    raw = {"activation": "tanh", **raw}  # run folders from before the setting trained tanh networks
    values: dict[str, Any] = {}
    for k, v in raw.items():
        origin = typing.get_origin(hints[k])
        values[k] = _tuples(v) if origin is tuple else v
    try:
        if isinstance(values.get("components"), dict):
            values["components"] = Components(**values["components"])
        return TrainConfig(**values)
    except TypeError as e:
        raise ConfigError(f"{where}: {e}.") from None


RESUME_CHANGES = ("total_steps", "eval_every", "threads")
"""The settings a resumed run may change; the others stay as its config.yaml says."""


def resumed_config(run: Path, saved: TrainConfig, asked: TrainConfig, name_of: Callable[[str], str]) -> TrainConfig:
    """The config that resumes ``run``: ``asked`` (config.yaml's ``saved`` with the flags given)
    if it differs only in :data:`RESUME_CHANGES`; a new ``total_steps`` is recorded in
    ``extensions`` with the steps done (the run trains on, or stops sooner, to that total).
    ConfigError (one sentence, the setting named by ``name_of``) if another setting differs or
    the new total is below the steps done. Reads state.json only."""
    for f in dataclasses.fields(saved):
        old, new = getattr(saved, f.name), getattr(asked, f.name)
        if f.name in RESUME_CHANGES or old == new:
            continue
        if isinstance(old, dict):  # the scenario's --set overrides
            key = next(k for k in sorted({*old, *new}) if old.get(k) != new.get(k))
            given, kept = f"--set {key}={new.get(key)}", f"{key}: {old.get(key, '(unset)')}"
        elif dataclasses.is_dataclass(old):  # the components
            sub = next(g.name for g in dataclasses.fields(old) if getattr(old, g.name) != getattr(new, g.name))
            given = f"--set {f.name}.{sub}={getattr(new, sub)}"
            kept = f"{f.name}.{sub}: {getattr(old, sub)}"
        else:
            flag = name_of(f.name)
            if flag.startswith("--set "):
                given = f"{flag}={_show(new)}"
            elif isinstance(new, bool):  # --bc / --no-bc
                given = flag if new else flag.replace("--", "--no-", 1)
            else:
                given = f"{flag} {_show(new)}"
            kept = f"{f.name}: {_show(old)}"
        may = ", ".join(name_of(k) for k in RESUME_CHANGES)
        raise ConfigError(
            f"{given} contradicts {run / 'config.yaml'} ({kept}): a resumed run keeps its settings, "
            f"only {may} may change."
        )
    if asked.total_steps == saved.total_steps:
        return asked
    state, _ = read_progress(run, saved)
    if asked.total_steps < state.steps:
        raise ConfigError(
            f"{name_of('total_steps')} {asked.total_steps} is below the {state.steps} steps {run} has trained already."
        )
    return dataclasses.replace(asked, extensions=(*saved.extensions, (state.steps, saved.total_steps)))


def _show(v: Any) -> str:
    if isinstance(v, tuple):
        return ",".join(map(str, v))
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


# ---------------------------------------------------------------------------------------------- state
def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise RunDirError(f"{path}: not a text file.") from None
    if not text.strip():
        raise RunDirError(f"{path}: is empty.")
    try:
        return json.loads(text)
    except ValueError as e:
        raise RunDirError(f"{path}: not valid JSON ({e}).") from None


def _sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def _parse_state(run: Path) -> tuple[TrainState, dict[str, str], int]:
    """state.json -> (state, staged file of each checkpoint of its commit, its version);
    RunDirError if it is missing, corrupt or of another version (version 2 is read as 3, its
    ``best_jct`` as ``best``)."""
    from agents.dual import AGENTS, TrainState

    path = run / "state.json"
    if not path.is_file():
        raise RunDirError(f"{path}: missing, so nothing records how far the run got; start a new run.")
    raw = _read_json(path)
    if not isinstance(raw, dict):
        raise RunDirError(f"{path}: expected a JSON object.")
    if "version" not in raw:
        raise RunDirError(
            f"{path}: written by an older train.py that did not commit its checkpoints atomically; "
            f"its agents still evaluate (evaluate.py --policies ppo:{run}), but start a new run to train."
        )
    version = raw["version"]
    if version not in (2, STATE_VERSION):
        raise RunDirError(f"{path}: state version {version!r}, this code reads versions 2 and {STATE_VERSION}.")
    if version == 2 and "best_jct" in raw:
        raw = {("best" if k == "best_jct" else k): v for k, v in raw.items()}
    if set(raw) != set(STATE_KEYS):
        missing, extra = set(STATE_KEYS) - set(raw), set(raw) - set(STATE_KEYS)
        what = "; ".join(x for x in (_keys("lacks", missing), _keys("has unknown", extra)) if x)
        raise RunDirError(f"{path}: {what}.")

    def bad(what: str) -> RunDirError:
        return RunDirError(f"{path}: {what}.")

    for k in ("generation", "phase", "in_phase", "steps"):
        if not isinstance(raw[k], int) or isinstance(raw[k], bool) or raw[k] < 0:
            raise bad(f"'{k}' must be a count (an integer >= 0), got {raw[k]!r}")
    b = raw["best"]
    if b is not None and (not isinstance(b, int | float) or isinstance(b, bool) or not math.isfinite(b)):
        raise bad(f"'best' must be a number or null, got {b!r}")
    evals = raw["evals"]
    if not isinstance(evals, list) or not all(
        isinstance(e, dict) and isinstance(e.get("steps"), int) and isinstance(e.get("agent"), dict) for e in evals
    ):
        raise bad("'evals' must be a list of evaluations, each with its 'steps' and 'agent' metrics")
    if not isinstance(raw["bc"], dict) or not set(raw["bc"]) <= set(AGENTS):
        raise bad(f"'bc' must map agents ({', '.join(AGENTS)}) to their cloning reports")
    sums, staged = raw["checkpoints"], raw["staged"]
    if not isinstance(sums, dict) or not all(
        k in CHECKPOINT_NAMES and isinstance(v, str) and len(v) == 40 for k, v in sums.items()
    ):
        raise bad(f"'checkpoints' must map checkpoint files ({', '.join(CHECKPOINT_NAMES)}) to their SHA-1")
    if not isinstance(staged, dict) or not all(
        k in sums and isinstance(v, str) and v.startswith(".") and "/" not in v and "\\" not in v
        for k, v in staged.items()
    ):
        raise bad("'staged' must map checkpoints of 'checkpoints' to file names in checkpoints/")
    state = TrainState(
        phase=raw["phase"],
        in_phase=raw["in_phase"],
        steps=raw["steps"],
        best=None if b is None else float(b),
        evals=evals,
        bc=raw["bc"],
        generation=raw["generation"],
        checkpoints=dict(sums),
    )
    return state, dict(staged), version


def _keys(verb: str, keys: set[str]) -> str:
    return f"{verb} {', '.join(repr(k) for k in sorted(keys))}" if keys else ""


def _file_of(run: Path, name: str, staged: dict[str, str]) -> Path:
    """The file holding checkpoint ``name`` of the commit: its staged name until it is renamed."""
    ck = run / "checkpoints"
    s = staged.get(name)
    return ck / s if s and (ck / s).is_file() else ck / name


def read_state(run: Path, config: TrainConfig) -> tuple[TrainState, dict[str, tuple[Path, bytes]]]:
    """The run's last commit: its state and the bytes of each checkpoint it names (checked against
    their SHA-1), by file name. RunDirError (one sentence naming the file) if state.json is
    missing, corrupt, of another version, inconsistent with config.yaml, or names a checkpoint
    that is missing or not the one committed. Reads only."""
    from agents.dual import AGENTS, best, latest

    state, staged = read_progress(run, config)
    path = run / "state.json"
    plan = config.phase_steps()
    for agent in AGENTS:
        trained = agent in state.bc or any(
            a == agent and (i < state.phase or (i == state.phase and state.in_phase))
            for i, (_, a, _) in enumerate(plan)
        )
        if trained and latest(agent) not in state.checkpoints:
            raise RunDirError(f"{path}: the {agent} agent was trained, but no checkpoint of it is named.")
    has_best = {best(a) in state.checkpoints for a in AGENTS}
    if has_best != {state.best is not None}:
        raise RunDirError(f"{path}: 'best' and the best checkpoints it names do not go together.")
    blobs = {}
    for name, sha in state.checkpoints.items():
        f = _file_of(run, name, staged)
        if not f.is_file():
            raise RunDirError(f"{f}: named by state.json, but missing.")
        data = f.read_bytes()
        if _sha1(data) != sha:
            raise RunDirError(f"{f}: not the checkpoint state.json names (its SHA-1 differs: truncated or replaced).")
        blobs[name] = (f, data)
    return state, blobs


def read_progress(run: Path, config: TrainConfig) -> tuple[TrainState, dict[str, str]]:
    """The run's last commit (its state and the staged file of each checkpoint) if its progress
    adds up under ``config``'s phases; RunDirError otherwise (see :func:`read_state`, which also
    checks the checkpoints). Reads state.json only."""
    state, staged, version = _parse_state(run)
    path = run / "state.json"
    if version == 2 and config.figure != "avg_jct_s":
        raise RunDirError(
            f"{path}: written by an older train.py that kept its best checkpoint by avg JCT, not by the "
            f"'{config.reward}' reward's {config.figure}; its agents still evaluate, but start a new run to train."
        )
    plan = config.phase_steps()
    if state.phase > len(plan) or (state.phase == len(plan) and state.in_phase):
        raise RunDirError(
            f"{path}: says phase {state.phase} (+{state.in_phase} steps), but config.yaml plans {len(plan)} phases."
        )
    done = sum(p[2] for p in plan[: state.phase])
    if state.steps != done + state.in_phase or state.in_phase % config.n_envs:
        raise RunDirError(
            f"{path}: {state.steps} steps done do not add up under config.yaml's phases ({done} steps in "
            f"{state.phase} phases done, then {state.in_phase}, in multiples of n_envs {config.n_envs})."
        )
    if any(e["steps"] > state.steps for e in state.evals):
        raise RunDirError(f"{path}: holds an evaluation after the {state.steps} steps done.")
    return state, staged


def checkpoint_files(run: Path) -> dict[str, Path]:
    """The checkpoints of the run's last commit, by name: the file that holds each (for a folder
    from before state.json had a version, or with no state.json: the plain files present)."""
    path = run / "state.json"
    raw = _read_json(path) if path.is_file() else {}
    if not isinstance(raw, dict):
        raise RunDirError(f"{path}: expected a JSON object.")
    if "version" not in raw:
        return {n: run / "checkpoints" / n for n in CHECKPOINT_NAMES if (run / "checkpoints" / n).is_file()}
    state, staged, _ = _parse_state(run)
    return {name: _file_of(run, name, staged) for name in state.checkpoints}


def commit(run: Path, state: TrainState, blobs: dict[str, bytes]) -> TrainState:
    """Make ``state`` the run's state, with the checkpoints ``blobs`` (file name -> bytes: those
    that changed; the others stay as committed). Returns the committed state (next generation,
    with the SHA-1 of every checkpoint)."""
    gen = state.generation + 1
    ck = run / "checkpoints"
    ck.mkdir(exist_ok=True)
    staged = {}
    for name, data in blobs.items():
        tmp = ck / f".{name.removesuffix('.zip')}.g{gen}.zip"
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        staged[name] = tmp.name
    if staged:
        _fsync_dir(ck)
    pause_point("save:staged")
    new = dataclasses.replace(
        state, generation=gen, checkpoints={**state.checkpoints, **{n: _sha1(d) for n, d in blobs.items()}}
    )
    doc = {"version": STATE_VERSION, **dataclasses.asdict(new), "staged": staged}
    atomic_write(run / "state.json", json.dumps(doc, indent=2) + "\n")
    _fsync_dir(run)
    pause_point("save:committed")
    for name, tmp_name in staged.items():
        os.replace(ck / tmp_name, ck / name)
    if staged:
        _fsync_dir(ck)
    return new


def settle(run: Path) -> None:
    """Finish the last commit of a folder :func:`read_state` accepted (rename its staged
    checkpoints) and delete what an unfinished commit or write left (hidden temporary files, in
    tb/'s folders too: TensorBoard would read an unfinished hparams file's)."""
    _, staged, _ = _parse_state(run)
    ck = run / "checkpoints"
    for name, tmp_name in staged.items():
        if (ck / tmp_name).is_file():
            os.replace(ck / tmp_name, ck / name)
    tb = [(f, UNFINISHED_FILE) for f in (run / "tb").glob("*") if f.is_dir()]  # the hparams file's
    for folder, pattern in ((run, UNFINISHED_FILE), (ck, UNFINISHED_CHECKPOINT), *tb):
        for f in folder.glob(".*"):
            if f.is_file() and pattern.fullmatch(f.name):
                f.unlink()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
