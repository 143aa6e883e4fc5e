"""Several training seeds of one config: independent runs, each in its usual run folder, in this
process one after the other (``local``) or as Ray tasks (``ray``: a local instance started here,
or the running cluster at an address), and their summary over seeds (mean and 95% confidence
interval, :func:`agents.evaluation.stat`).

A seed's run is the same wherever it runs: the same config (the seed replaced), the same steps,
the same numbers in its state.json and TensorBoard files. Its evaluations are seen as they come
in both backends (train.py prints a progress line for each): on Ray, the tasks send them to an
actor that the driver reads (:class:`Relay`), so the workers need not share the driver's files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envs.sim.config import ConfigError
from envs.sim.fileio import signals_held

SUMMARY_KEYS = ("avg_jct_s", "p95_jct_s", "avg_queue_s", "utilization", "jobs_unfinished")
"""The agent's figures at its last evaluation that the summary gives over seeds."""

if TYPE_CHECKING:  # agents.dual imports torch: only when a seed trains
    from agents.dual import TrainConfig
    from agents.evaluation import Stat

Watch = Callable[[int], Callable[[dict[str, Any]], None]]
"""seed -> what sees each evaluation of its run"""
Steps = Callable[[int, int], None]
"""(seed, env steps): sees the steps of each seed's run as they are trained"""


def parse_seeds(text: str) -> tuple[int, ...]:
    """``"0-4"`` -> (0, 1, 2, 3, 4); ``"0,3,7-8"`` -> (0, 3, 7, 8). ConfigError if it is not such a
    list or names a seed twice."""
    seeds: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m or (m[2] is not None and int(m[2]) < int(m[1])):
            raise ConfigError(f"--seeds expects seeds such as 0-4 or 0,3,7-8, got '{text}'.")
        seeds += range(int(m[1]), int(m[2] or m[1]) + 1)
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds names a seed twice: '{text}'.")
    return tuple(seeds)


@dataclass(frozen=True)
class SeedRun:
    """One seed's finished run: its folder, steps trained, the agent's figures at the last
    evaluation (``final``) and its reward's figure at its best evaluation (``best``: None if no
    evaluation finished every job)."""

    seed: int
    run: str
    steps: int
    final: dict[str, float]
    best: float | None


def train_seed(
    config: TrainConfig,
    out: str,
    demos: str,
    command: list[str],
    hold: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    watch: Watch | None = None,
    steps: Steps | None = None,
) -> SeedRun:
    """Train ``config`` from scratch in a new run folder under ``out`` (demonstrations cached in
    ``demos``), as train.py does for one seed. The folder is created inside ``hold()`` (train.py:
    with stop signals held, so that it is created whole); after the cloning, ``watch(seed)``
    gives what sees each evaluation (:attr:`agents.dual.Trainer.on_eval`); ``steps`` sees the
    steps as they are trained (:attr:`agents.dual.Trainer.progress`)."""
    from agents.dual import Trainer

    seed = config.seed
    trainer = Trainer(config, progress=None if steps is None else lambda n: steps(seed, n))
    with hold():
        run = trainer.create(Path(out), command)
    if config.bc:
        trainer.warm_start(Path(demos))
    if watch is not None:
        trainer.on_eval = watch(config.seed)
    state = trainer.train()
    return SeedRun(config.seed, str(run), state.steps, dict(state.evals[-1]["agent"]), state.best)


def run_seeds(
    config: TrainConfig,
    seeds: Sequence[int],
    out: str,
    demos: str,
    command: list[str],
    backend: str = "local",
    address: str | None = None,
    cpus: int = 2,
    on_done: Callable[[SeedRun], None] | None = None,
    hold: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    watch: Watch | None = None,
    steps: Steps | None = None,
) -> list[SeedRun]:
    """Train ``config`` once per seed; the runs in seed order. ``backend``: ``local`` (in this
    process, one after the other) or ``ray`` (one Ray task per seed, on the cluster at
    ``address``, or on a local instance of ``cpus`` CPUs started and shut down here). ``on_done``
    sees each run as it finishes; ``hold``: see :func:`train_seed` (local only); ``watch`` and
    ``steps``: see :func:`train_seed`, called here in both backends (on Ray, with what the tasks
    send: :class:`Relay`).
    An exception here (Ctrl-C) cancels the seeds not done; each run folder holds its last
    commit, and resumes."""
    configs = [dataclasses.replace(config, seed=s) for s in seeds]
    out, demos = str(Path(out).resolve()), str(Path(demos).resolve())
    done: dict[int, SeedRun] = {}

    def finished(r: SeedRun) -> None:
        done[r.seed] = r
        if on_done:
            on_done(r)

    if backend == "local":
        for c in configs:
            finished(train_seed(c, out, demos, command, hold, watch, steps))
    elif backend == "ray":
        _run_ray(configs, out, demos, command, address, cpus, finished, watch, steps)
    else:
        raise ConfigError(f"unknown backend '{backend}'; valid backends: local, ray.")
    return [done[s] for s in seeds]


def _run_ray(
    configs: list[TrainConfig],
    out: str,
    demos: str,
    command: list[str],
    address: str | None,
    cpus: int,
    finished: Callable[[SeedRun], None],
    watch: Watch | None,
    steps: Steps | None,
) -> None:
    """One Ray task per config; each run's evaluations and steps reach ``watch`` and ``steps``
    here through a :class:`Mailbox` actor (the workers of a cluster need not share this machine's
    files), read every :data:`POLL_S` seconds and before each finished run goes to ``finished``."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--backend ray needs Ray: pip install -e '.[ray]'.") from None
    from agents.evaluation import start_ray

    started = start_ray(address, cpus)
    pending: list[Any] = []
    mailbox: Any = None
    try:
        remote: Any = ray.remote(num_cpus=1)(_train_seed_relayed)
        if watch is not None or steps is not None:
            mailbox = ray.remote(num_cpus=0)(Mailbox).remote()
        relay = Relay(mailbox, evals=watch is not None, steps=steps is not None)
        pending = [remote.remote(c, out, demos, command, relay) for c in configs]
        seen: dict[int, Callable[[dict[str, Any]], None]] = {}

        def deliver() -> None:
            if mailbox is None:
                return
            for seed, kind, what in ray.get(mailbox.take.remote()):
                if kind == "steps" and steps is not None:
                    steps(seed, what)
                elif kind == "watched" and watch is not None:
                    seen[seed] = watch(seed)
                elif kind == "eval":
                    seen[seed](what)

        with signals_held(interrupt=True):  # a stop leaves Ray's wait as a KeyboardInterrupt
            while pending:
                ready, pending = ray.wait(pending, num_returns=1, timeout=POLL_S)
                deliver()  # a run's messages are all in before its task is done (Relay waits for each)
                for r in ready:
                    finished(ray.get(r))
    finally:
        # ray.shutdown() below stops an instance started here, its tasks with it; a cancel that
        # races a task's end can abort the driver in Ray's core (2.60 included)
        if not started:
            for r in pending:
                ray.cancel(r, force=True)
        if mailbox is not None:
            ray.kill(mailbox)
        if started:
            ray.shutdown()


POLL_S = 1.0
"""seconds between the Ray driver's reads of its :class:`Mailbox`"""


def _train_seed_relayed(config: TrainConfig, out: str, demos: str, command: list[str], relay: Relay) -> SeedRun:
    """:func:`train_seed` in a Ray task, watched by ``relay`` (one object for both, so that its
    evaluations send the steps before them)."""
    watch = relay if relay.evals else None
    return train_seed(config, out, demos, command, watch=watch, steps=relay.steps if relay.send_steps else None)


Message = tuple[int, str, Any]
"""(seed, kind, what) from a Ray task to the driver: ``("watched", None)`` when the run's
evaluations start being watched, ``("eval", entry)`` for each evaluation, ``("steps", n)`` for
``n`` more steps trained"""


class Mailbox:
    """A Ray actor's class: the :data:`Message` of the seeds' runs, in the order they came, until
    taken."""

    def __init__(self) -> None:
        self._messages: list[Message] = []

    def put(self, message: Message) -> None:
        self._messages.append(message)

    def take(self) -> list[Message]:
        out, self._messages = self._messages, []
        return out


class Relay:
    """What a Ray task calls where it trains, as its :data:`Watch` and :data:`Steps`: each sends
    its :data:`Message` to a :class:`Mailbox` actor, each put waited for (so a finished task has
    sent all of them). Steps are sent at most every :data:`POLL_S` seconds, the rest summed, and
    all before the next evaluation (every phase ends with one: a finished run has sent them all)."""

    def __init__(self, mailbox: Any, evals: bool, steps: bool) -> None:
        self.mailbox = mailbox
        self.evals, self.send_steps = evals, steps
        """whether to send the evaluations, the steps"""
        self._unsent: dict[int, int] = {}
        self._sent_at = -math.inf

    def _send(self, message: Message) -> None:
        import ray

        ray.get(self.mailbox.put.remote(message))

    def __call__(self, seed: int) -> Callable[[dict[str, Any]], None]:
        self._send((seed, "watched", None))

        def evaluated(entry: dict[str, Any]) -> None:
            self._flush(seed)
            self._send((seed, "eval", entry))

        return evaluated

    def steps(self, seed: int, n: int) -> None:
        self._unsent[seed] = self._unsent.get(seed, 0) + n
        if time.monotonic() - self._sent_at >= POLL_S:
            self._flush(seed)

    def _flush(self, seed: int) -> None:
        n = self._unsent.pop(seed, 0)
        if n:
            self._send((seed, "steps", n))
        self._sent_at = time.monotonic()


def summary(runs: Sequence[SeedRun], figure: str = "avg_jct_s") -> dict[str, Stat]:
    """Each of :data:`SUMMARY_KEYS` and the reward's ``figure`` at the last evaluation, and
    ``best`` (``figure`` at each seed's best evaluation), over the seeds."""
    from agents.evaluation import stat

    out = {k: stat([r.final.get(k) for r in runs]) for k in dict.fromkeys((*SUMMARY_KEYS, figure))}
    out["best"] = stat([r.best for r in runs])
    return out
