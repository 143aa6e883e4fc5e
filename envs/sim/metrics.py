"""The one implementation of every reported figure (DESIGN section 5).

Definitions. JCT = finish - submit. Queuing delay = time holding no GPU between submit and
finish, every wait and re-queue included. Slowdown = JCT / duration, where duration is the
job's run time alone on its requested GPUs. Finish-time fairness rho = JCT / (duration x
max(1, N/G)), with N the mean number of jobs in the system and G the mean GPUs open to training
(training pool plus loaned servers) over the job's life; a job is unfair when rho > 1.05.
``worst_ftf_run`` and ``unfair_fraction_run`` use the run's contention instead, the same for
every job: N = jobs that arrived in the run, G = mean GPUs open to training over the run. That is
the figure Shockwave reports (uw-mad-dash/shockwave ``Scheduler.get_finish_time_fairness``:
``max(1, jobs in the trace / GPUs)``; its lifetime variant, which ours above matches, it calls
Themis'). It only means something when the jobs arrive in a burst, as in ``dynamic``; over a
trace that spans days it is near 0.
Statistics over jobs use the finished jobs; unfinished ones are counted in ``jobs_unfinished``
(and count as misses in ``deadline_hit_ratio``); jobs the cluster could never run and that the
scenario left out (``workload.unrunnable=drop``) in ``jobs_dropped``. Offered load = GPUs x
duration summed over the jobs, per second of the arrival window (first to last submit), over
the training pool's GPUs (null if every job arrives at once). Makespan = last finish - first submit (if a
job is unfinished, end of the run - first submit).

Accuracy (jobs with a learning curve, ``envs/sim/accuracy.py``): a job's accuracy at its end is
its curve at the work fraction it reached (``work_done / work``; less than 1 when it was stopped
early). ``accuracy_hit_ratio``: over arrived jobs with a required accuracy, the share that ended
by their deadline (any time, if they have none) with at least that accuracy: the user has the
model they asked for when they needed it (ours; a job that ends late misses, since its model is
delivered when it ends). ``stopped_early``: jobs ended by a ``Stop`` action.

Utilisation (time-weighted, exact), over the arrival window [first submit, last submit] so that
every policy is measured over the same interval (over the whole run when all jobs arrive at
once): ``utilization_training`` = busy GPU-s on training servers / their GPU-s while up;
``utilization_loaned`` = busy GPU-s on loaned servers / GPU-s on loan (null if nothing was
loaned); ``utilization`` = Aryl's combined usage: (training busy anywhere + inference demand) /
all GPUs of both pools.

``decision_ms_*`` are wall-clock figures, the only ones that differ between two runs of the
same seed; every other figure is a pure function of the inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from envs.sim.engine import SimResult
from envs.sim.model import JobClass, Pool
from envs.sim.workload import offered_load

UNFAIR_RHO = 1.05

#: key -> (unit, meaning); the README's table is generated from this and must match.
METRICS: dict[str, tuple[str, str]] = {
    "jobs_total": ("jobs", "jobs submitted in the episode"),
    "jobs_finished": ("jobs", "jobs that finished before the horizon"),
    "jobs_unfinished": ("jobs", "jobs still queued or running at the horizon"),
    "jobs_dropped": ("jobs", "jobs left out before the run as unrunnable (workload.unrunnable=drop)"),
    "offered_load": ("share", "GPU-s asked per second of the arrival window / training GPUs"),
    "avg_jct_s": ("s", "mean job completion time"),
    "p50_jct_s": ("s", "median job completion time"),
    "p95_jct_s": ("s", "95th percentile job completion time"),
    "p99_jct_s": ("s", "99th percentile job completion time"),
    "avg_queue_s": ("s", "mean queuing delay (all waits, re-queues included)"),
    "p50_queue_s": ("s", "median queuing delay"),
    "p95_queue_s": ("s", "95th percentile queuing delay"),
    "p99_queue_s": ("s", "99th percentile queuing delay"),
    "avg_slowdown": ("x", "mean JCT / duration"),
    "p50_slowdown": ("x", "median slowdown"),
    "p95_slowdown": ("x", "95th percentile slowdown"),
    "p99_slowdown": ("x", "99th percentile slowdown"),
    "te_p50_slowdown": ("x", "median slowdown of trial-and-error jobs"),
    "te_p95_slowdown": ("x", "95th percentile slowdown of trial-and-error jobs"),
    "be_p50_slowdown": ("x", "median slowdown of best-effort jobs"),
    "be_p95_slowdown": ("x", "95th percentile slowdown of best-effort jobs"),
    "te_avg_jct_s": ("s", "mean JCT of trial-and-error jobs"),
    "be_avg_jct_s": ("s", "mean JCT of best-effort jobs"),
    "elastic_avg_jct_s": ("s", "mean JCT of elastic jobs"),
    "inelastic_avg_jct_s": ("s", "mean JCT of inelastic jobs"),
    "makespan_s": ("s", "last finish - first submit"),
    "utilization": ("share", "combined usage: (training busy + inference demand) / all GPUs"),
    "utilization_training": ("share", "busy / available GPU-s on training servers"),
    "utilization_loaned": ("share", "busy / loaned GPU-s on loaned inference servers"),
    "loaned_server_hours": ("server-h", "server-hours on loan to training (whole run)"),
    "preemptions": ("count", "preemptions of all jobs"),
    "preemptions_reclaim": ("count", "preemptions of jobs on servers being reclaimed"),
    "preemptions_per_be_job": ("count", "mean preemptions per best-effort job"),
    "scale_events": ("count", "changes of an elastic job's worker count"),
    "migrations": ("count", "running jobs moved to other servers"),
    "worst_ftf": ("x", "largest finish-time fairness rho"),
    "unfair_fraction": ("share", "share of jobs with rho > 1.05"),
    "worst_ftf_run": ("x", "largest rho against the whole run's contention (Shockwave's figure)"),
    "unfair_fraction_run": ("share", "share of jobs with that rho > 1.05"),
    "deadline_hit_ratio": ("share", "share of jobs with a deadline that met it"),
    "accuracy_hit_ratio": ("share", "share of jobs with a required accuracy that ended with it by their deadline"),
    "avg_final_accuracy": ("share", "mean accuracy at the end, over finished jobs with a learning curve"),
    "stopped_early": ("count", "jobs stopped before their work was done (at a required accuracy)"),
    "fee": ("$", "GPU-hours held x price of the GPU type"),
    "gpu_hours_lost": ("GPU-h", "GPU-hours of work redone after preemptions"),
    "decision_ms_mean": ("ms", "mean wall-clock time of one scheduling decision"),
    "decision_ms_p99": ("ms", "99th percentile of the decision time"),
}

TIMING_KEYS = ("decision_ms_mean", "decision_ms_p99")


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _stat(values: np.ndarray, fn: Callable[[np.ndarray], float]) -> float | None:
    return _num(fn(values)) if values.size else None


def _pct(q: float) -> Callable[[np.ndarray], float]:
    return lambda v: float(np.percentile(v, q))


def summarize(r: SimResult) -> dict[str, float | int | None]:
    """The figures of one run, keyed as in :data:`METRICS` (``None`` where one does not apply)."""
    arrived = r.submit <= r.end_time
    done = np.isfinite(r.finish)
    duration = np.array([j.duration for j in r.jobs])
    jct = (r.finish - r.submit)[done]
    slow = jct / duration[done]
    queue = r.queued[done]
    rho = jct / (duration[done] * r.fair_share[done])
    run_gpu_s = r.usage.capacity_training_gpu_s + r.usage.capacity_loaned_gpu_s
    run_share = max(1.0, arrived.sum() * r.usage.seconds / run_gpu_s) if run_gpu_s > 0 else 1.0
    rho_run = jct / (duration[done] * run_share)
    te = np.array([j.job_class == JobClass.TE for j in r.jobs], dtype=bool)
    elastic = np.array([j.elastic for j in r.jobs], dtype=bool)
    deadline = np.array([j.deadline if j.deadline is not None else np.nan for j in r.jobs])
    has_dl = np.isfinite(deadline) & arrived
    mean = lambda v: float(np.mean(v))  # noqa: E731
    be_done = ~te[done]
    be_all = ~te & arrived
    if done.all():
        makespan = float(r.finish.max() - r.submit.min()) if r.finish.size else 0.0
    else:
        makespan = r.end_time - float(r.submit.min())
    dec = r.decision_ms
    u = r.usage_window
    cap_all = u.capacity_training_gpu_s + u.capacity_inference_gpu_s
    out: dict[str, float | int | None] = {
        "jobs_total": len(r.jobs),
        "jobs_finished": int(done.sum()),
        "jobs_unfinished": int(len(r.jobs) - done.sum()),
        "jobs_dropped": r.dropped,
        "offered_load": offered_load(r.jobs, sum(s.num_gpus for s in r.servers if s.pool == Pool.TRAINING)),
        "avg_jct_s": _stat(jct, mean),
        "p50_jct_s": _stat(jct, _pct(50)),
        "p95_jct_s": _stat(jct, _pct(95)),
        "p99_jct_s": _stat(jct, _pct(99)),
        "avg_queue_s": _stat(queue, mean),
        "p50_queue_s": _stat(queue, _pct(50)),
        "p95_queue_s": _stat(queue, _pct(95)),
        "p99_queue_s": _stat(queue, _pct(99)),
        "avg_slowdown": _stat(slow, mean),
        "p50_slowdown": _stat(slow, _pct(50)),
        "p95_slowdown": _stat(slow, _pct(95)),
        "p99_slowdown": _stat(slow, _pct(99)),
        "te_p50_slowdown": _stat(slow[te[done]], _pct(50)),
        "te_p95_slowdown": _stat(slow[te[done]], _pct(95)),
        "be_p50_slowdown": _stat(slow[be_done], _pct(50)),
        "be_p95_slowdown": _stat(slow[be_done], _pct(95)),
        "te_avg_jct_s": _stat(jct[te[done]], mean),
        "be_avg_jct_s": _stat(jct[be_done], mean),
        "elastic_avg_jct_s": _stat(jct[elastic[done]], mean),
        "inelastic_avg_jct_s": _stat(jct[~elastic[done]], mean),
        "makespan_s": _num(makespan),
        "utilization": _num(
            (u.busy_training_gpu_s + u.busy_loaned_gpu_s + u.inference_gpu_s) / cap_all if cap_all > 0 else math.nan
        ),
        "utilization_training": _num(
            u.busy_training_gpu_s / u.capacity_training_gpu_s if u.capacity_training_gpu_s > 0 else math.nan
        ),
        "utilization_loaned": _num(
            u.busy_loaned_gpu_s / u.capacity_loaned_gpu_s if u.capacity_loaned_gpu_s > 0 else math.nan
        ),
        "loaned_server_hours": _num(_loaned_server_hours(r)),
        "preemptions": int(r.preemptions.sum()),
        "preemptions_reclaim": int(r.preemptions_reclaim.sum()),
        "preemptions_per_be_job": _stat(r.preemptions[be_all].astype(float), mean),
        "scale_events": int(r.scale_events.sum()),
        "migrations": int(r.migrations.sum()),
        "worst_ftf": _stat(rho, np.max),
        "unfair_fraction": _stat((rho > UNFAIR_RHO).astype(float), mean),
        "worst_ftf_run": _stat(rho_run, np.max),
        "unfair_fraction_run": _stat((rho_run > UNFAIR_RHO).astype(float), mean),
        "deadline_hit_ratio": _stat((r.finish[has_dl] <= deadline[has_dl]).astype(float), mean),
        "accuracy_hit_ratio": _stat(_accuracy_hits(r, arrived), mean),
        "avg_final_accuracy": _stat(_final_accuracy(r, done), mean),
        "stopped_early": int(r.stopped.sum()),
        "fee": _num(float(r.fee.sum())),
        "gpu_hours_lost": _num(float(r.lost_gpu_s.sum()) / 3600.0),
        "decision_ms_mean": _stat(dec, mean),
        "decision_ms_p99": _stat(dec, _pct(99)),
    }
    assert list(out) == list(METRICS), "metrics and their table disagree"
    return out


def _fraction(r: SimResult, j: int) -> float:
    return float(r.work_done[j] / r.work[j]) if r.work[j] > 0 else 1.0


def _accuracy_hits(r: SimResult, arrived: np.ndarray) -> np.ndarray:
    """Per arrived job with a required accuracy and a curve: 1.0 if it finished by its deadline
    (any time, without one) with at least that accuracy. Unfinished jobs miss."""
    hits = []
    for j, spec in enumerate(r.jobs):
        if spec.required_accuracy is None or spec.curve is None or not arrived[j]:
            continue
        on_time = np.isfinite(r.finish[j]) and (spec.deadline is None or r.finish[j] <= spec.deadline)
        hits.append(float(on_time and spec.curve.accuracy(_fraction(r, j)) >= spec.required_accuracy - 1e-12))
    return np.array(hits)


def _final_accuracy(r: SimResult, done: np.ndarray) -> np.ndarray:
    return np.array(
        [spec.curve.accuracy(_fraction(r, j)) for j, spec in enumerate(r.jobs) if done[j] and spec.curve is not None]
    )


def _loaned_server_hours(r: SimResult) -> float:
    per_server = next((s.num_gpus for s in r.servers if s.pool == Pool.INFERENCE), 1)
    return r.usage.capacity_loaned_gpu_s / per_server / 3600.0
