"""``LOANGYM_SMOKE=1``: every command line runs as written, at smoke-test sizes.

The one place that reads the variable. The CLIs (train.py, evaluate.py, demos.py and the
benchmarks) pass the sizes they resolved through these functions, which return them unchanged
unless ``LOANGYM_SMOKE`` is set to a non-empty value other than ``0``. Then:

* seeds: the first :data:`SEEDS` of every seed list (``--seeds 0-49`` runs 0 and 1);
* jobs: every episode holds at most :data:`JOBS` jobs (the scenario setting
  ``workload.num_jobs``, a window of the first jobs of a trace or synthetic workload; a benchmark
  of its own generator takes :data:`JOBS` jobs instead);
* workers: at most :data:`WORKERS` processes (or CPUs of a local Ray instance);
* training: a new run's step budget and evaluation interval are divided by
  :data:`STEPS_DIVISOR` (``--resume RUN --total-steps N`` likewise, so an extension stays one),
  and :data:`TRAIN_SIZES` cap its other sizes (rollouts, demonstrations, cloning); it evaluates
  on its first held-out seed;
* repetitions and episodes: one.

The first use prints one line on stderr saying so, so no smoke figure passes for a real one.
``tests/test_readme_commands.py`` runs every command of the README this way.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from agents.dual import TrainConfig

VARIABLE = "LOANGYM_SMOKE"
SEEDS = 2
"""seeds kept of every seed list (two, so that a confidence interval exists)"""
JOBS = 30
"""jobs of every episode at most"""
WORKERS = 2
"""processes or Ray CPUs at most"""
STEPS_DIVISOR = 1000
"""a training budget (``--total-steps``, ``--eval-every``) is divided by this (at least 1 step)"""
TRAIN_SIZES = {"n_steps": 32, "batch_size": 32, "demo_episodes": 1, "bc_epochs": 1}
"""the most a new training run's rollouts, minibatches, demonstrations and cloning passes take
(its held-out seeds are cut to the first one)"""

T = TypeVar("T")
_said = False


def active() -> bool:
    """Whether ``LOANGYM_SMOKE`` asks for smoke sizes."""
    on = os.environ.get(VARIABLE, "").strip() not in ("", "0")
    global _said
    if on and not _said:
        _said = True
        print(
            f"{VARIABLE}=1: smoke sizes (at most {SEEDS} seeds, {JOBS} jobs an episode, {WORKERS} workers, "
            f"training steps / {STEPS_DIVISOR}); no figure of this run is a result",
            file=sys.stderr,
            flush=True,
        )
    return on


def seeds(values: Sequence[T]) -> list[T]:
    """The seeds to run: all of ``values``, or their first :data:`SEEDS` in smoke mode."""
    return list(values[:SEEDS]) if active() else list(values)


def sets(values: Mapping[str, str]) -> dict[str, str]:
    """Scenario overrides, with ``workload.num_jobs`` at most :data:`JOBS` in smoke mode."""
    out = dict(values)
    if active():
        given = int(out.get("workload.num_jobs", "0") or 0)
        out["workload.num_jobs"] = str(min(given, JOBS) if given > 0 else JOBS)
    return out


def count(value: int, smoke: int) -> int:
    """A size (jobs, workers, episodes, repetitions): ``value``, or at most ``smoke`` in smoke mode."""
    return min(value, smoke) if active() else value


def jobs(value: int | None) -> int | None:
    """A benchmark's own job count (``None``: its settings' own): at most :data:`JOBS` in smoke mode."""
    if not active():
        return value
    return JOBS if value is None else min(value, JOBS)


def steps(value: int | None) -> int | None:
    """A training budget: ``value``, or ``value // STEPS_DIVISOR`` (at least 1) in smoke mode."""
    if not active() or value is None:
        return value
    return max(1, value // STEPS_DIVISOR)


def train_config(config: TrainConfig) -> TrainConfig:
    """A new training run's config: ``config``, or at smoke sizes in smoke mode (not for
    ``--resume``, whose config.yaml holds the sizes it was made with: see :func:`steps`)."""
    if not active():
        return config
    return dataclasses.replace(
        config,
        total_steps=max(1, config.total_steps // STEPS_DIVISOR),
        eval_every=max(1, config.eval_every // STEPS_DIVISOR),
        eval_seeds=config.eval_seeds[:1],
        overrides=sets(config.overrides),
        **{k: min(getattr(config, k), v) for k, v in TRAIN_SIZES.items()},
    )
