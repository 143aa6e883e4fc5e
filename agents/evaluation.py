"""Evaluation sweeps: policies x scenarios x seeds x settings -> metrics, results files.

A sweep is a list of :class:`Task` (one per policy, scenario, seed and combination of ``--set``
values), built and checked by :func:`plan` before anything runs or is written. :func:`run_task`
is a pure function of its task (same task -> same figures, bar the wall-clock ``decision_ms_*``),
so tasks run in any order: inline, in a local process pool, or as Ray tasks (:func:`execute`),
and come back in task order; the two backends give identical results.

Two kinds of policy, one simulator:

* a heuristic by name (``fifo``) runs through :func:`envs.sim.scenarios.simulate`, the engine's
  own event loop;
* ``ppo:RUN`` (a run folder of train.py) puts both trained agents in their seats of
  :class:`envs.core.Core`, the code path of the RL envs (the loop of
  :func:`agents.partners.run_episode`; see :mod:`agents.trained`), with the components
  (placement, scaling, reclaim, preemption), job slots and reward in the run's config.yaml and the
  task's scenario, overrides and seed. Deterministic actions; the best checkpoints (the latest
  where there is no best). An agent takes no ``policy.*`` settings: its tasks leave them out.

A heuristic run through Core equals its engine run exactly (tests/test_envs.py checks it for every
component heuristic), so agents and heuristics are scored by the same simulator code. If the
task's cluster has another number of servers than the placement agent was trained for, the run's
placement heuristic places instead, and the task's ``notes`` say so (ours). A run folder trained
for another observation layout (``obs_version``, job slots or observation sizes in layout.json
that differ from the env built for the task) is a user error.

Every finished task is saved as ``OUT/tasks/<name>.json`` (atomically; with the per-job JCT, rho,
slowdown and class, and the time series, which the plots need and results.json leaves out). A
rerun with the same OUT skips the tasks whose file exists; results.json is rebuilt from exactly
the current command's tasks, with aggregates over seeds (:func:`aggregate`: mean, std, 95% CI)
and ratios to a reference policy (:func:`ratios`). Plots and TensorBoard: :mod:`agents.plots`.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import io
import itertools
import json
import logging
import math
import multiprocessing
import os
import platform
import re
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import numpy as np
from scipy import stats

from agents.provenance import git_commit
from agents.trained import AgentSpec, Models, check_agent, episode, file_digest, is_agent, load_agent
from envs.sim import scenarios
from envs.sim.config import ConfigError, SettingInfo, describe
from envs.sim.engine import DecisionError, SimResult
from envs.sim.feasibility import UnrunnableError, unrunnable
from envs.sim.fileio import STOP_SIGNALS, atomic_write, signals_held
from envs.sim.metrics import METRICS, summarize
from envs.sim.model import JobClass
from heuristics import registry

log = logging.getLogger(__name__)

RESULTS_VERSION = 2
TASK_FILE_VERSION = 1
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Task:
    """One run. ``scenario_sets`` are ``--set`` overrides of the scenario, ``policy_sets`` of the
    policy given as ``policy.<field>=value`` (for every heuristic of the sweep), ``own_sets`` those
    given as ``<this policy>.<field>=value`` (for this one alone); an agent takes none. ``agent`` is set for
    ``ppo:RUN`` policies; ``inputs`` is a digest of the files the run reads (trace, checkpoints),
    so that a resumed sweep does not reuse results computed from other files. ``borrowing``:
    whether every policy of the sweep borrows inference servers; it fixes which jobs must be
    runnable, so that every policy of a sweep replays the same jobs (``scenarios.build``)."""

    policy: str
    scenario: str
    seed: int
    scenario_sets: tuple[tuple[str, str], ...] = ()
    policy_sets: tuple[tuple[str, str], ...] = ()
    agent: AgentSpec | None = None
    inputs: str = ""
    borrowing: bool = True  # every policy of the sweep borrows: see scenarios.build (one job set for all)
    own_sets: tuple[tuple[str, str], ...] = ()

    @property
    def settings(self) -> dict[str, str]:
        """Every setting of the run, as given: scenario keys, ``policy.<field>``, ``<policy>.<field>``."""
        own = {f"{self.policy}.{k}": v for k, v in self.own_sets}
        return dict(self.scenario_sets) | {f"policy.{k}": v for k, v in self.policy_sets} | own

    @property
    def policy_overrides(self) -> dict[str, str]:
        """The fields of the policy's config this run sets (``policy_sets`` and ``own_sets``)."""
        return dict(self.policy_sets) | dict(self.own_sets)

    def key(self) -> str:
        ident = [
            self.policy,
            self.scenario,
            self.seed,
            self.scenario_sets,
            self.policy_sets,
            self.inputs,
            self.borrowing,
        ]
        if self.agent is not None:
            a = self.agent
            ident.append([a.max_jobs, *dataclasses.astuple(a.components), a.reward])
        if self.own_sets:  # only then: the keys (and task files) of other sweeps stay as they were
            ident.append(["own", self.own_sets])
        return hashlib.sha1(json.dumps(ident).encode()).hexdigest()[:16]

    def file_name(self) -> str:
        return f"{_slug(self.policy)}__{_slug(self.scenario)}__{self.seed}__{self.key()}.json"


@dataclass
class TaskResult:
    """What one task produced. ``jobs``: per finished job ``id``, ``jct_s``, ``rho``, ``slowdown``,
    ``te`` (1 for trial-and-error); ``series``: the engine's sampled time series."""

    task: Task
    metrics: dict[str, Any]
    notes: tuple[str, ...] = ()
    jobs: dict[str, list[float]] = field(default_factory=dict)
    series: dict[str, list[float]] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- arguments
def split_sets(
    sets: Mapping[str, str], policies: Sequence[str] = ()
) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, str]]]:
    """``--set`` pairs -> (scenario overrides, overrides of every policy: keys given as
    ``policy.<field>``, overrides of one policy: ``{name: {field: value}}`` for keys given as
    ``<name>.<field>``, where ``name`` is one of the heuristics ``policies``). A key naming a
    registered policy that is not among ``policies`` is the user's error."""
    scen: dict[str, str] = {}
    pol: dict[str, str] = {}
    own: dict[str, dict[str, str]] = {}
    for k, v in sets.items():
        head, _, field_ = k.partition(".")
        if head == "policy":
            pol[field_] = v
        elif head in policies and field_:
            own.setdefault(head, {})[field_] = v
        elif field_ and head in registry.names():
            listed = ", ".join(p for p in policies) or "none"
            raise ConfigError(f"--set {k} sets policy '{head}', which is not among the evaluated policies ({listed}).")
        else:
            scen[k] = v
    for name, fields in own.items():
        both = sorted(set(fields) & set(pol))
        if both:
            raise ConfigError(
                f"--set policy.{both[0]} and --set {name}.{both[0]} both set {name}'s {both[0]}; give one of them."
            )
    return scen, pol, own


def is_policy_key(key: str, policy: str) -> bool:
    """Whether setting ``key`` (as in :attr:`Task.settings`) is a policy setting of ``policy``'s
    runs (``policy.<field>`` or ``<policy>.<field>``) rather than a scenario one."""
    return key.startswith(("policy.", f"{policy}."))


def parse_seeds(text: str) -> list[int]:
    """``"0,1,2"`` or ``"0-4"`` or a mix: ``"0-2,7"`` (duplicates dropped, order kept). A seed is an
    integer from 0 up (numpy's ``SeedSequence`` takes no negative one); a sweep names at most
    :data:`MAX_TASKS` of them (checked before the list is built)."""
    ranges: list[range] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = _SEED_RANGE.fullmatch(part)
        if m is None:
            raise ConfigError(f"--seeds expects integers like 0,1,2 or 0-4, got '{text}'.")
        lo = int(m[1])
        hi = int(m[2]) if m[2] is not None else lo
        if lo < 0 or hi < 0:
            raise ConfigError(
                f"--seeds {part}: seeds are integers from 0 up (numpy's SeedSequence takes none below 0)."
            )
        if hi < lo:
            raise ConfigError(f"--seeds {part}: a range runs from its low seed to its high one, e.g. {hi}-{lo}.")
        ranges.append(range(lo, hi + 1))
    if not ranges:
        raise ConfigError(f"--seeds names no seed: '{text}'.")
    n = _distinct(ranges)
    if n > MAX_TASKS:
        raise ConfigError(f"--seeds {text} names {n:,} seeds, more than the {MAX_TASKS:,} tasks a sweep may hold.")
    return list(dict.fromkeys(itertools.chain.from_iterable(ranges)))


#: ``12`` or ``3-7`` (signed, so that a negative seed gets its own sentence; spaces around the dash)
_SEED_RANGE = re.compile(r"(-?[0-9]+)(?:\s*-\s*(-?[0-9]+))?")

#: the most tasks (policies x scenarios x settings x seeds) one sweep may hold: a typo such as
#: ``--seeds 0-99999999999`` is refused with a sentence instead of filling the memory
MAX_TASKS = 100_000


def _distinct(ranges: Sequence[range]) -> int:
    """How many integers the (possibly overlapping) ranges cover together."""
    n, end = 0, -1
    for r in sorted(ranges, key=lambda r: r.start):
        lo = max(r.start, end + 1)
        n += max(0, r.stop - lo)
        end = max(end, r.stop - 1)
    return n


def check_size(tasks: Sequence[Task]) -> None:
    """Raise the user's error if the sweep holds more than :data:`MAX_TASKS` tasks."""
    if len(tasks) > MAX_TASKS:
        raise ConfigError(
            f"the sweep holds {len(tasks):,} tasks (policies x scenarios x settings x seeds), more than the "
            f"{MAX_TASKS:,} one command may run; split it over several commands."
        )


def parse_grid(items: Sequence[str]) -> list[dict[str, str]]:
    """``--set`` items -> one dict of settings per point of the grid (ours): ``key=v1,v2`` sweeps
    ``key`` over v1 and v2, and the grid is the Cartesian product over all keys, in the order given.
    A ``;`` inside a value stands for a ``,`` of that one value (tuple items: ``baselines=fifo;sjf``,
    ``cluster.training_mix=V100-32GB:6;A100-40GB:4``)."""
    axes: dict[str, list[str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got '{item}'.")
        values = [v.strip().replace(";", ",") for v in value.split(",")]
        if len(values) > 1 and not all(values):
            raise ConfigError(f"--set {key}: an empty value in the list '{value}'.")
        axes[key] = list(dict.fromkeys(values))
    points = math.prod(len(v) for v in axes.values())
    if points > MAX_TASKS:
        raise ConfigError(
            f"--set sweeps a grid of {points:,} points, more than the {MAX_TASKS:,} tasks a sweep may hold."
        )
    return [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]


def setting_keys(scenario: str) -> list[SettingInfo]:
    """Every ``--set`` key of a sweep on ``scenario`` (its fields, then ``<policy>.<field>`` for
    every registered policy with settings), with type, default and rule; an unknown scenario is
    the user's error."""
    rows = describe(scenarios.get(scenario, {}))
    for name in registry.names():
        config = registry.entry(name).config
        if config is not None:
            rows += describe(config(), f"{name}.")
    return rows


def parse_names(text: str, what: str) -> list[str]:
    names = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if not names:
        raise ConfigError(f"--{what} names nothing: '{text}'.")
    return names


# ---------------------------------------------------------------------------------------------- planning
def plan(
    policies: Sequence[str],
    scenario_names: Sequence[str],
    seeds: Sequence[int],
    grid: Sequence[Mapping[str, str]] = ({},),
) -> list[Task]:
    """Every task of the sweep, each checked (scenario builds, trace loads, policy and settings
    exist, agents match the envs, the sweep's size, every job of every seed runnable): raises the
    user's error before anything runs or is written."""
    agents: dict[str, AgentSpec] = {}
    for p in policies:
        if is_agent(p):
            agents[p] = load_agent(p)
        else:
            registry.entry(p)
    lenders = {p: registry.make(agents[p].components.placement if p in agents else p).borrows for p in policies}
    borrowing = all(lenders.values())
    labels = [agents[p].label if p in agents else p for p in policies]
    if len(set(labels)) < len(labels):
        dup = next(x for x in labels if labels.count(x) > 1)
        raise ConfigError(f"two policies are both named '{dup}'; give the run folders different names.")
    heuristics = [p for p in policies if p not in agents]
    Own = dict[str, tuple[tuple[str, str], ...]]
    points: dict[tuple[tuple[str, str], ...], list[tuple[tuple[tuple[str, str], ...], Own]]] = {}
    for sets in grid:  # scenario settings -> their policy settings (all, own), in grid order
        scen_sets, pol_sets, own = split_sets(sets, heuristics)
        own_t = {name: tuple(fields.items()) for name, fields in own.items()}
        points.setdefault(tuple(scen_sets.items()), []).append((tuple(pol_sets.items()), own_t))
    tasks: list[Task] = []
    to_check: list[scenarios.Scenario] = []  # checked for unrunnable jobs once the sweep's size is known
    for scen in scenario_names:
        for scen_tuple, pol_points in points.items():
            scenario = scenarios.get(scen, dict(scen_tuple))
            for p in policies:
                for name in agents[p].components.names() if p in agents else (p,):
                    registry.check_information(name, scenario.information.level)
            to_check.append(scenario)
            trace = scenario.workload.trace
            trace_digest = file_digest(Path(trace)) if trace and Path(trace).is_file() else ""
            for p in policies:
                agent = agents.get(p)
                if agent is not None:
                    check_agent(agent, scen, scen_tuple)
                inputs = hashlib.sha1((trace_digest + (agent.digest if agent else "")).encode()).hexdigest()[:16]
                for pol_tuple, own_t in pol_points if agent is None else [((), {})]:
                    mine = own_t.get(p, ())
                    if agent is None:
                        _check_policy(p, pol_tuple, mine, heuristics)
                    label = agent.label if agent else p
                    tasks.extend(
                        Task(label, scen, s, scen_tuple, pol_tuple, agent, inputs, borrowing, mine) for s in seeds
                    )
    out = list(dict.fromkeys(tasks))  # a policy without a swept setting of another runs once
    check_size(out)  # before any scenario is built for its seeds
    non_lenders = [p for p in policies if not lenders[p]]
    for scenario in to_check:
        for seed in seeds:
            _check_runnable(scenario, seed, non_lenders)
    return out


def _check_policy(
    name: str, every: tuple[tuple[str, str], ...], own: tuple[tuple[str, str], ...], heuristics: Sequence[str]
) -> None:
    """Raise the user's error if policy ``name`` cannot take these settings; where a
    ``policy.<field>`` setting is the one it lacks, the sentence says how to set one policy."""
    try:
        registry.make(name, dict(every) | dict(own))
    except ConfigError as e:
        try:
            registry.make(name, dict(own))
        except ConfigError:
            raise e from None
        field_, value = next((kv for kv in every if not _takes(name, dict([kv]))), every[0])
        takers = [h for h in heuristics if _takes(h, {field_: value})]
        example = f"--set {takers[0]}.{field_}={value}" if takers else f"--set <policy>.{field_}={value}"
        raise ConfigError(
            f"policy '{name}' does not take --set policy.{field_} ({str(e).rstrip('.')}), which sets every "
            f"policy of the sweep; set one policy's with {example}."
        ) from None


def _takes(name: str, overrides: Mapping[str, str]) -> bool:
    try:
        registry.make(name, overrides)
    except ConfigError:
        return False
    return True


def _check_runnable(scenario: scenarios.Scenario, seed: int, non_lenders: Sequence[str]) -> None:
    """Raise the user's error if a job of ``seed`` can never run under some policy of the sweep:
    under all of them (``scenarios.build``'s sentence), or under those that never borrow (one
    sentence naming the first). With ``workload.unrunnable=drop`` the tasks drop such jobs instead,
    and only a seed that leaves those policies nothing to run is refused (``scenarios.build``'s
    sentence)."""
    built = scenarios.build(scenario, seed)
    if not non_lenders:
        return
    if scenario.workload.unrunnable != "error":
        scenarios.build(scenario, seed, borrowing=False)
        return
    bad = unrunnable(built.jobs, built.servers, built.demand, borrowing=False)
    if bad:
        raise UnrunnableError(
            f"policy '{non_lenders[0]}' never borrows inference servers, so {len(bad)} of {len(built.jobs)} jobs "
            f"(seed {seed}) can never run under it, e.g. job {bad[0].name!r}, which {bad[0].reason}; drop them "
            "for every policy with --set workload.unrunnable=drop, or evaluate that policy in a sweep of its own."
        )


# ---------------------------------------------------------------------------------------------- running
class TaskFailed(Exception):
    """A task's run stopped on the engine's :class:`~envs.sim.engine.DecisionError` (a policy's
    action the cluster cannot carry out, or a livelock): one sentence naming the task, its
    settings and the engine's reason."""


def run_task(task: Task, models: Models | None = None) -> TaskResult:
    """Run one task; ``models``: checkpoint bytes of its agents (read from the run folder if absent)."""
    notes: list[str] = []
    try:
        if task.agent is None:
            scenario = scenarios.get(task.scenario, dict(task.scenario_sets))
            policy = registry.make(task.policy, task.policy_overrides)
            result = scenarios.simulate(scenario, policy, task.seed, borrowing=task.borrowing)
        else:
            result, notes = episode(task.agent, task.scenario, task.scenario_sets, task.seed, models, task.borrowing)
    except DecisionError as e:
        sets = ", ".join(f"{k}={v}" for k, v in task.settings.items())
        raise TaskFailed(
            f"{task.policy} on scenario {task.scenario}, seed {task.seed}{f' ({sets})' if sets else ''} stopped: {e}"
        ) from None
    metrics = summarize(result)
    if result.dropped:
        notes.append(
            f"{_jobs(result.dropped)} the cluster can never run left out before the run (workload.unrunnable=drop)"
        )
    if metrics["jobs_unfinished"]:
        notes.append(
            f"{metrics['jobs_unfinished']} of {_jobs(metrics['jobs_total'])} unfinished at the {result.stopped_by} "
            f"(t = {result.end_time:,.0f} s): its job statistics count the finished jobs only"
        )
    return TaskResult(task, metrics, tuple(notes), per_job(result), _series(result))


def _jobs(n: Any) -> str:
    return f"{n} job" + ("" if n == 1 else "s")


def per_job(r: SimResult) -> dict[str, list[float]]:
    """Per finished job (as in :mod:`envs.sim.metrics`): id, JCT, rho, slowdown, te (0/1)."""
    done = np.isfinite(r.finish)
    duration = np.array([j.duration for j in r.jobs])[done]
    jct = (r.finish - r.submit)[done]
    te = np.array([j.job_class == JobClass.TE for j in r.jobs], dtype=float)[done]
    return {
        "id": np.flatnonzero(done).astype(float).tolist(),
        "jct_s": jct.tolist(),
        "rho": (jct / (duration * r.fair_share[done])).tolist(),
        "slowdown": (jct / duration).tolist(),
        "te": te.tolist(),
    }


def _series(r: SimResult) -> dict[str, list[float]]:
    return {k: v.tolist() for k, v in r.series.items()}


def execute(
    tasks: Sequence[Task],
    backend: str = "local",
    workers: int = 1,
    address: str | None = None,
    on_done: Callable[[TaskResult], None] | None = None,
    models: Models | None = None,
) -> list[TaskResult]:
    """Run every task; results in task order. ``backend``: ``local`` (inline when ``workers`` is
    1, else a process pool) or ``ray`` (Ray tasks on the cluster at ``address``, or on a local
    instance with ``workers`` CPUs that is started and shut down here).

    ``on_done`` sees each result as it arrives. An exception here (a KeyboardInterrupt, a failed
    task) stops the sweep at once: the queued tasks are cancelled and the running ones abandoned
    (the pool's workers are terminated; Ray's tasks cancelled, the local instance shut down),
    after ``on_done`` has seen every result that had already arrived; then it propagates."""
    index = {t: i for i, t in enumerate(tasks)}
    results: list[TaskResult | None] = [None] * len(tasks)

    def done(r: TaskResult) -> None:
        results[index[r.task]] = r
        if on_done:
            on_done(r)

    if backend == "ray":
        _run_ray(tasks, workers, address, done, models)
    elif backend != "local":
        raise ConfigError(f"unknown backend '{backend}'; valid backends: local, ray.")
    elif workers <= 1 or len(tasks) <= 1:
        for t in tasks:
            done(run_task(t, models))
    else:
        _run_pool(tasks, workers, done, models)
    return [r for r in results if r is not None]


#: seconds a terminated pool worker gets to exit before it is killed
STOP_S = 5.0


def _run_pool(tasks: Sequence[Task], workers: int, done: Callable[[TaskResult], None], models: Models | None) -> None:
    """The tasks in a local process pool. Its workers leave interrupts to this process: a Ctrl-C
    at the terminal reaches the whole process group, and only the parent acts on it."""
    pool = ProcessPoolExecutor(max_workers=min(workers, len(tasks)), initializer=_pool_worker)
    futures = []
    reported: set[Future[TaskResult]] = set()
    try:
        # workers are forked here: blocked, a stop signal cannot reach one before it ignores it
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            futures = [pool.submit(run_task, t, models) for t in tasks]
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        for fut in as_completed(futures):
            reported.add(fut)
            done(fut.result())
    except BaseException:
        _stop_pool(pool)
        for fut in futures:  # results that arrived while the interrupted one was handled
            if fut not in reported and fut.done() and not fut.cancelled() and fut.exception() is None:
                done(fut.result())
        raise
    pool.shutdown()


def _pool_worker() -> None:
    """A pool worker's start: SIGINT ignored, SIGTERM (the parent's stop) ends it quietly."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel the queued tasks and end the workers now (their running tasks are lost): terminate,
    then kill what is still there after :data:`STOP_S` seconds."""
    procs = list((pool._processes or {}).values())  # no public way before Python 3.14's terminate_workers()
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        p.terminate()
    for p in procs:
        p.join(STOP_S)
        if p.is_alive():
            p.kill()
            p.join()


def require_ray() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError("--backend ray needs Ray: pip install -e '.[ray]'.") from None


def start_ray(address: str | None, cpus: int) -> bool:
    """Join the Ray cluster at ``address``, or start a local instance with ``cpus`` CPUs, unless
    Ray is already running here; True if this call started or joined it (the caller then shuts
    it down). Workers import this repository's packages from its root (the package need not be
    installed); the caller's SIGTERM handler stays (``ray.init`` would make SIGTERM a sys.exit)."""
    import ray

    if ray.is_initialized():
        return False
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    kw: dict[str, Any] = dict(
        log_to_driver=False, logging_level=logging.WARNING, runtime_env={"env_vars": {"PYTHONPATH": path}}
    )
    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        if address:
            try:
                ray.init(address=address, **kw)
            except ConnectionError as e:
                raise ConfigError(f"--address {address}: could not join the Ray cluster there ({e}).") from None
        else:
            ray.init(num_cpus=max(1, cpus), include_dashboard=False, **kw)
    finally:  # see interrupts()
        if sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, sigterm)
    return True


def _run_ray(
    tasks: Sequence[Task], workers: int, address: str | None, done: Callable[[TaskResult], None], models: Models | None
) -> None:
    import ray

    started = start_ray(address, workers)
    pending: list[Any] = []
    try:
        remote: Any = ray.remote(num_cpus=1)(run_task)
        ref = ray.put(dict(models or {}))
        pending = [remote.remote(t, ref) for t in tasks]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                done(ray.get(r))
    except BaseException:
        if pending:  # keep what has arrived, cancel the rest
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
            for r in pending:
                ray.cancel(r, force=True)
            for r in ready:
                try:
                    result = ray.get(r, timeout=0)
                except Exception:  # a failed task: its error is not the one being raised
                    continue
                done(result)
        raise
    finally:
        if started:
            ray.shutdown()


@dataclass
class Sweep:
    """A sweep's results (task order) and how many came from task files of an earlier run."""

    results: list[TaskResult]
    reused: int


def sweep(
    tasks: Sequence[Task],
    out: Path | None,
    on_done: Callable[[TaskResult], None] | None = None,
    **run: Any,
) -> Sweep:
    """Run the tasks that have no task file under ``out/tasks`` (all if ``out`` is None), saving
    each one's file as soon as it finishes; ``run``: arguments of :func:`execute`. Interrupted
    (see :func:`execute`), it leaves the file of every task that finished, and a rerun with the
    same ``out`` resumes from them; it removes the temporary files a writer killed mid-write left
    there (``SIGKILL`` cannot be held off as other interrupts are), so one sweep at a time may use
    an ``out`` folder."""
    have: dict[Task, TaskResult] = {}
    if out is not None:
        for leftover in (out / "tasks").glob(".*.tmp"):  # (atomic_open's temporary files)
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        for t in tasks:
            r = load_task(out, t)
            if r is not None:
                have[t] = r
                if on_done:
                    on_done(r)

    def finished(r: TaskResult) -> None:
        with signals_held():  # an interrupt here waits: a saved file is one on_done has counted
            if out is not None:
                save_task(out, r)
            if on_done:
                on_done(r)

    todo = [t for t in tasks if t not in have]
    for r in execute(todo, on_done=finished, **run):
        have[r.task] = r
    return Sweep([have[t] for t in tasks], len(tasks) - len(todo))


def check_out(out: Path) -> None:
    """Raise the user's error if ``out`` (and its ``tasks/`` folder) cannot be created or written.
    Leaves the file system as it found it (the folders it made to find out are removed)."""
    folder = out / "tasks"
    missing = [p for p in (folder, *folder.parents) if not p.exists()]  # deepest first
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ConfigError(
            f"--out {out}: cannot create or write the results folder there ({e.strerror or e})."
        ) from None
    finally:
        for p in missing:
            with contextlib.suppress(OSError):
                p.rmdir()


@contextlib.contextmanager
def interrupts() -> Iterator[None]:
    """Inside, SIGTERM raises KeyboardInterrupt, as a first Ctrl-C does: both stop a sweep the
    same way (:func:`execute`). Once one has arrived, the next SIGINT or SIGTERM ends the process
    at once with exit status 130, killing its worker processes, whatever the cleanup is doing
    (task files are written atomically: none is left half-written). The previous handlers come
    back only if no interrupt arrived. Main thread only."""
    hit = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal hit
        if hit:
            _exit_now()
        hit = True
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        if not hit:
            for s, h in previous.items():
                signal.signal(s, h)


def _exit_now() -> NoReturn:
    for p in multiprocessing.active_children():  # the pool's workers; Ray's processes share the driver's fate
        p.kill()
    os.write(2, b"interrupted again: stopped at once\n")
    os._exit(130)


# ---------------------------------------------------------------------------------------------- task files
def task_path(out: Path, task: Task) -> Path:
    return out / "tasks" / task.file_name()


def save_task(out: Path, r: TaskResult) -> Path:
    t = r.task
    doc = {
        "version": TASK_FILE_VERSION,
        "key": t.key(),
        "task": _row(r),
        "jobs": r.jobs,
        "series": r.series,
    }
    return atomic_write(task_path(out, t), json.dumps(doc, allow_nan=False, separators=(",", ":")) + "\n")


def load_task(out: Path, task: Task) -> TaskResult | None:
    """The saved result of ``task``, or None if there is none, or it is unreadable or stale (another
    file version or task key, or metrics other than today's :data:`METRICS`)."""
    path = task_path(out, task)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("version") != TASK_FILE_VERSION or doc.get("key") != task.key():
        return None
    row = doc["task"]
    if list(row.get("metrics", {})) != list(METRICS):
        return None
    return TaskResult(task, row["metrics"], tuple(row.get("notes", ())), doc["jobs"], doc["series"])


# ---------------------------------------------------------------------------------------------- aggregation
@dataclass(frozen=True)
class Stat:
    """One metric over seeds: mean, sample standard deviation, the half-width of the 95%
    confidence interval of the mean (Student t with n - 1 degrees of freedom: the interval is
    mean +- ci95) and n, the seeds where the metric is defined (ours: seeds where it is null,
    e.g. no job of a class, are left out). std and ci95 are null for n < 2; all are null for n = 0."""

    mean: float | None
    std: float | None
    ci95: float | None
    n: int


@dataclass(frozen=True)
class Aggregate:
    policy: str
    scenario: str
    settings: tuple[tuple[str, str], ...]
    seeds: tuple[int, ...]
    metrics: dict[str, Stat]

    @property
    def scenario_settings(self) -> tuple[tuple[str, str], ...]:
        """The settings of the scenario (the rest are the policy's: :func:`is_policy_key`)."""
        return tuple(kv for kv in self.settings if not is_policy_key(kv[0], self.policy))

    @property
    def policy_settings(self) -> tuple[tuple[str, str], ...]:
        return tuple(kv for kv in self.settings if is_policy_key(kv[0], self.policy))


def stat(values: Sequence[float | None]) -> Stat:
    v = np.array([x for x in values if x is not None], dtype=float)
    n = len(v)
    if n == 0:
        return Stat(None, None, None, 0)
    mean = math.fsum(v) / n
    if n < 2:
        return Stat(mean, None, None, n)
    std = float(np.std(v, ddof=1))
    return Stat(mean, std, float(stats.t.ppf(0.975, n - 1)) * std / math.sqrt(n), n)


def aggregate(results: Sequence[TaskResult]) -> list[Aggregate]:
    """One :class:`Aggregate` per (policy, scenario, settings), in order of first appearance."""
    groups: dict[tuple[str, str, tuple[tuple[str, str], ...]], list[TaskResult]] = {}
    for r in results:
        groups.setdefault((r.task.policy, r.task.scenario, tuple(r.task.settings.items())), []).append(r)
    return [
        Aggregate(p, s, sets, tuple(r.task.seed for r in rs), {k: stat([r.metrics[k] for r in rs]) for k in METRICS})
        for (p, s, sets), rs in groups.items()
    ]


def reference_of(agg: Aggregate, aggregates: Sequence[Aggregate], reference: str) -> Aggregate | None:
    """The reference policy's aggregate to compare ``agg`` with, on the same scenario and scenario
    settings: the one with the same settings; else the only one whose ``policy.*`` settings agree
    with ``agg``'s where both have them (a policy swept alone with ``<policy>.<field>``, or an
    agent, which takes no policy settings, against a reference without that sweep). None where
    several would do (the reference is swept over a setting ``agg`` lacks)."""
    same = [
        a
        for a in aggregates
        if a.policy == reference and a.scenario == agg.scenario and a.scenario_settings == agg.scenario_settings
    ]
    exact = [a for a in same if a.settings == agg.settings]
    if exact:
        return exact[0]
    mine = {k: v for k, v in agg.policy_settings if k.startswith("policy.")}
    fit = [a for a in same if all(mine.get(k, v) == v for k, v in a.policy_settings if k.startswith("policy."))]
    return fit[0] if len(fit) == 1 else None


def incomplete(agg: Aggregate) -> bool:
    """Whether some run of the aggregate left jobs unfinished (its job statistics then count the
    finished jobs only, and are no fair comparison)."""
    return bool(agg.metrics["jobs_unfinished"].mean)


def ratios(aggregates: Sequence[Aggregate], reference: str) -> list[dict[str, Any]]:
    """For every aggregate: each metric's mean / the reference policy's mean (null where either
    is null or the reference's is 0). Above 1: the policy's figure is larger (for times,
    slowdowns and preemptions: worse; for utilisation and deadline hits: better). Ratios are
    computed only between aggregates whose runs all finished every job; otherwise every ratio of
    the row is null and ``why`` says which side left jobs unfinished. ``reference_settings``: the
    settings of the reference's aggregate compared with (:func:`reference_of`)."""
    out: list[dict[str, Any]] = []
    for a in aggregates:
        ref = reference_of(a, aggregates, reference)
        if ref is None:
            continue
        short = [x.policy for x in ((a,) if a is ref else (a, ref)) if incomplete(x)]
        row = {}
        for k, s in a.metrics.items():
            m, rm = s.mean, ref.metrics[k].mean
            row[k] = m / rm if m is not None and rm is not None and rm != 0 and not short else None
        why = f"{' and '.join(short)} left jobs unfinished" if short else None
        out.append(
            {"policy": a.policy, "scenario": a.scenario, "settings": dict(a.settings), "reference": reference}
            | {"reference_settings": dict(ref.settings), "metrics": row, "why": why}
        )
    return out


# ---------------------------------------------------------------------------------------------- results files
def _row(r: TaskResult) -> dict[str, Any]:
    t = r.task
    row: dict[str, Any] = {
        "policy": t.policy,
        "scenario": t.scenario,
        "seed": t.seed,
        "settings": t.settings,
        "oracle": t.agent is None and registry.entry(t.policy).oracle,
        "metrics": r.metrics,
        "notes": list(r.notes),
    }
    if t.agent is not None:
        a = t.agent
        row["agent"] = {"run": a.run, "checkpoints": list(a.checkpoints), "sha1": a.digest}
    return row


def results_document(
    results: Sequence[TaskResult], command: Sequence[str], reference: str | None = None
) -> dict[str, Any]:
    aggs = aggregate(results)
    return {
        "version": RESULTS_VERSION,
        "runs": [_row(r) for r in results],
        "aggregates": [
            {
                "policy": a.policy,
                "scenario": a.scenario,
                "settings": dict(a.settings),
                "seeds": list(a.seeds),
                "metrics": {k: s.__dict__ for k, s in a.metrics.items()},
            }
            for a in aggs
        ],
        "ratios": ratios(aggs, reference) if reference else [],
        "metric_units": {k: unit for k, (unit, _) in METRICS.items()},
        "meta": {
            "command": list(command),
            "commit": git_commit(),
            "python": platform.python_version(),
            "reference": reference,
            "workloads": workloads(results),
        },
    }


def workloads(results: Sequence[TaskResult]) -> list[dict[str, Any]]:
    """What each (scenario, scenario settings, seed) replayed, the same for every policy of a
    sweep: jobs run, jobs dropped as unrunnable, and the offered load."""
    seen: dict[tuple[str, tuple[tuple[str, str], ...], int], dict[str, Any]] = {}
    for r in results:
        t = r.task
        key = (t.scenario, t.scenario_sets, t.seed)
        if key not in seen:
            m = r.metrics
            seen[key] = {"scenario": t.scenario, "settings": dict(t.scenario_sets), "seed": t.seed} | {
                k: m[k] for k in ("jobs_total", "jobs_dropped", "offered_load")
            }
    return list(seen.values())


def write_results(
    out: Path, results: Sequence[TaskResult], command: Sequence[str], reference: str | None = None
) -> dict[str, Any]:
    """results.json, results.csv (one row per run) and aggregates.csv (one row per policy,
    scenario, settings and metric), each written atomically; returns the results document."""
    doc = results_document(results, command, reference)
    atomic_write(out / "results.json", json.dumps(doc, indent=2, sort_keys=False) + "\n")
    keys = list(METRICS)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["policy", "scenario", "seed", "settings", *keys, "notes"])
    for run in doc["runs"]:
        cells = [_cell(run["metrics"][k]) for k in keys]
        w.writerow(
            [run["policy"], run["scenario"], run["seed"], _settings(run["settings"]), *cells, "; ".join(run["notes"])]
        )
    atomic_write(out / "results.csv", buf.getvalue())
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["policy", "scenario", "settings", "metric", "mean", "std", "ci95", "n", "ratio"])
    ratio = {(r["policy"], r["scenario"], _settings(r["settings"])): r["metrics"] for r in doc["ratios"]}
    for a in doc["aggregates"]:
        g = (a["policy"], a["scenario"], _settings(a["settings"]))
        for k, s in a["metrics"].items():
            rv = ratio[g][k] if g in ratio else None
            w.writerow([*g, k, *(_cell(s[x]) for x in ("mean", "std", "ci95", "n")), _cell(rv)])
    atomic_write(out / "aggregates.csv", buf.getvalue())
    return doc


def _settings(s: Mapping[str, str]) -> str:
    return ";".join(f"{k}={v}" for k, v in s.items())


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "x"


def default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))
