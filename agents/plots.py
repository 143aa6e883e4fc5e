"""Plots of an evaluation sweep (matplotlib, Agg backend) and its TensorBoard record.

The tasks are grouped by scenario and scenario settings; each group gets a folder under
``OUT/plots/`` in which the policies (with their ``policy.*`` settings, if any) are compared:

* ``jct_cdf.png``: empirical CDF of the JCT of every finished job, all seeds pooled, per policy;
* ``timeline.png``: over time, for one seed (the group's first): jobs waiting; busy GPUs of the
  training pool (its GPUs up, dotted); GPUs of the inference pool busy with loaned training work
  (the inference demand, grey); servers on loan;
* ``class_slowdown.png``: p50 and p95 slowdown of trial-and-error (te) and best-effort (be) jobs,
  mean over seeds with the 95% confidence interval as error bars, per policy;
* ``fairness.png``: finish-time fairness rho of every finished job (all seeds), sorted, per policy,
  on a log scale, with the unfair threshold rho = 1.05; the legend gives the unfair share.

:func:`write_tensorboard` writes ``eval/<metric>/<policy>`` scalars (mean over seeds) and the
PNGs as images (``plots/<name>``), one TensorBoard run per scenario under ``OUT/tb/``, each
setting of a sweep on its own step (:func:`sweep_runs`), so that a sweep reads as a curve.
"""

from __future__ import annotations

import io
import itertools
import re
import shutil
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, ScalarFormatter

from agents.evaluation import Aggregate, Stat, TaskResult, stat
from envs.sim.fileio import atomic_write
from envs.sim.metrics import METRICS, UNFAIR_RHO

CLASS_BARS = (
    ("te p50", "te_p50_slowdown"),
    ("te p95", "te_p95_slowdown"),
    ("be p50", "be_p50_slowdown"),
    ("be p95", "be_p95_slowdown"),
)
PLOTS = ("jct_cdf", "timeline", "class_slowdown", "fairness")


def label(result: TaskResult) -> str:
    """The policy's name in plots and TensorBoard: its name, then its settings (``policy.*`` and
    its own)."""
    t = result.task
    sets = (*t.policy_sets, *t.own_sets)
    return t.policy + (" [" + ",".join(f"{k}={v}" for k, v in sets) + "]" if sets else "")


def groups(results: Sequence[TaskResult]) -> dict[str, list[TaskResult]]:
    """Results by (scenario, scenario settings), as a folder name, in order of first appearance."""
    out: dict[str, list[TaskResult]] = {}
    for r in results:
        out.setdefault(group_name(r.task.scenario, r.task.scenario_sets), []).append(r)
    return out


def group_name(scenario: str, settings: Sequence[tuple[str, str]]) -> str:
    """The folder (and TensorBoard run) of a scenario with its settings (``policy.*`` ones left out)."""
    scen = [(k, v) for k, v in settings if not k.startswith("policy.")]
    return _slug(scenario + ("__" + "_".join(f"{k}-{v}" for k, v in scen) if scen else ""))


def _colors(names: Sequence[str]) -> dict[str, tuple[float, ...]]:
    cmap = plt.get_cmap("tab10")
    return {n: cmap(i % 10) for i, n in enumerate(names)}


def _styles(names: Sequence[str]) -> dict[str, str]:
    """Line styles that keep coinciding curves (two policies deciding alike) visible."""
    return {n: ("-", "--", "-.", ":")[i % 4] for i, n in enumerate(names)}


def jct_cdf(curves: Mapping[str, Sequence[float]], title: str = "") -> Figure:
    """One step line per policy: share of finished jobs with JCT <= x (hours, log scale)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors, styles = _colors(list(curves)), _styles(list(curves))
    for name, jct in curves.items():
        x = np.sort(np.asarray(jct, dtype=float)) / 3600.0
        if x.size:
            y = np.arange(1, x.size + 1) / x.size
            ax.step(x, y, where="post", label=f"{name} (mean {x.mean():.2f} h)", color=colors[name], ls=styles[name])
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("share of finished jobs")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title or "JCT CDF")
    fig.tight_layout()
    return fig


def timeline(series: Mapping[str, Mapping[str, Sequence[float]]], title: str = "") -> Figure:
    """Four panels over time (hours): jobs waiting, training-pool busy GPUs, loaned busy GPUs
    (with the inference demand), servers on loan; one line per policy, each with its own colour
    and line style (and the first drawn widest, so that coinciding curves stay visible), and a
    legend on every panel. A policy whose run kept no time series is named in the legend as such."""
    fig, axes = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
    names = list(series)
    colors, styles = _colors(names), _styles(names)
    widths = {n: 1.0 + 1.5 * (len(names) - 1 - i) / max(1, len(names) - 1) for i, n in enumerate(names)}
    first = True
    for name, s in series.items():
        line = {"color": colors[name], "ls": styles[name], "lw": widths[name], "label": name}
        if not len(s.get("time", ())):
            for ax in axes:
                ax.plot([], [], **(line | {"label": f"{name}: no time series recorded"}))
            continue
        t = np.asarray(s["time"], dtype=float) / 3600.0
        axes[0].plot(t, s["queue"], **line)
        axes[1].plot(t, s["busy_training"], **line)
        axes[1].plot(t, s["capacity_training"], color=colors[name], lw=0.8, ls=":", label=f"{name}: GPUs up")
        if first:
            axes[2].fill_between(t, 0, s["inference_gpus"], color="0.85", label="inference demand")
            first = False
        axes[2].plot(t, s["busy_loaned"], **line)
        axes[3].plot(t, s["loaned_servers"], **line)
    axes[0].set_ylabel("jobs waiting")
    axes[1].set_ylabel("training pool\nbusy GPUs (up: dotted)")
    axes[2].set_ylabel("inference pool\nGPUs busy with\nloaned training")
    axes[3].set_ylabel("servers on loan")
    axes[3].set_xlabel("time (hours)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper right", fontsize=7, ncol=2)
    axes[0].set_title(title or "timeline")
    fig.tight_layout()
    return fig


def class_slowdown(bars: Mapping[str, Mapping[str, Stat]], title: str = "") -> Figure:
    """Grouped bars: for each of te p50, te p95, be p50, be p95 one bar per policy (mean over
    seeds; error bar: 95% CI). A class without finished jobs has no bar."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = list(bars)
    colors = _colors(names)
    width = 0.8 / max(1, len(names))
    x = np.arange(len(CLASS_BARS))
    for i, name in enumerate(names):
        stats = [bars[name][k] for _, k in CLASS_BARS]
        mean = [s.mean if s.mean is not None else np.nan for s in stats]
        err = [s.ci95 if s.ci95 is not None else 0.0 for s in stats]
        ax.bar(x + (i - (len(names) - 1) / 2) * width, mean, width, yerr=err, capsize=3, label=name, color=colors[name])
    ax.set_xticks(x, [h for h, _ in CLASS_BARS])
    ax.set_ylabel("slowdown (JCT / duration alone)")
    ax.axhline(1.0, color="0.4", lw=0.8, ls="--")
    ax.set_ylim(bottom=0)  # a slowdown is at least 1: an interval reaching below 0 is cut at 0
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or "slowdown per job class (mean over seeds, 95% CI)")
    fig.tight_layout()
    return fig


def fairness(rho: Mapping[str, Sequence[float]], title: str = "") -> Figure:
    """Per policy the rho of every finished job, largest first, against the job's rank (share of
    jobs); a horizontal line at the unfair threshold."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors, styles = _colors(list(rho)), _styles(list(rho))
    for name, values in rho.items():
        v = np.sort(np.asarray(values, dtype=float))[::-1]
        if v.size:
            rank = np.arange(1, v.size + 1) / v.size
            unfair = float(np.mean(v > UNFAIR_RHO))
            ax.step(rank, v, where="post", color=colors[name], ls=styles[name], label=f"{name} (unfair {unfair:.0%})")
    ax.axhline(UNFAIR_RHO, color="red", lw=0.8, ls="--", label=f"rho = {UNFAIR_RHO}")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("share of finished jobs (ranked by rho, largest first)")
    ax.set_ylabel("finish-time fairness rho (log scale)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or "finish-time fairness per job")
    fig.tight_layout()
    return fig


def figures(results: Sequence[TaskResult], title: str) -> dict[str, Figure]:
    """The four plots of one group of results."""
    by: dict[str, list[TaskResult]] = {}
    for r in results:
        by.setdefault(label(r), []).append(r)
    first_seed = min(r.task.seed for r in results)
    series = {}
    for name, rs in by.items():
        shown = min(rs, key=lambda r: (r.task.seed != first_seed, r.task.seed))
        series[f"{name} (seed {shown.task.seed})"] = shown.series
    return {
        "jct_cdf": jct_cdf({n: _pool(rs, "jct_s") for n, rs in by.items()}, f"{title}: JCT CDF (all seeds)"),
        "timeline": timeline(series, f"{title}: over time"),
        "class_slowdown": class_slowdown(
            {n: {k: stat([r.metrics[k] for r in rs]) for _, k in CLASS_BARS} for n, rs in by.items()},
            f"{title}: slowdown per job class (mean over seeds, 95% CI)",
        ),
        "fairness": fairness({n: _pool(rs, "rho") for n, rs in by.items()}, f"{title}: finish-time fairness per job"),
    }


def _pool(results: Sequence[TaskResult], key: str) -> list[float]:
    return [x for r in results for x in r.jobs.get(key, [])]


def save_png(fig: Figure, path: Path) -> Path:
    """Write ``fig`` as a PNG, atomically, and close it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return atomic_write(path, buf.getvalue())


def write_plots(results: Sequence[TaskResult], out: Path) -> dict[str, list[Path]]:
    """PNGs for every group under ``out`` (``out/<group>/<plot>.png``); group -> files."""
    written: dict[str, list[Path]] = {}
    for name, rs in groups(results).items():
        title = rs[0].task.scenario + (" " + _short(rs[0].task.scenario_sets) if rs[0].task.scenario_sets else "")
        written[name] = [save_png(fig, out / name / f"{p}.png") for p, fig in figures(rs, title).items()]
    return written


@dataclass(frozen=True)
class SweepRun:
    """One TensorBoard run of a sweep: a scenario with the settings every task of it shares.

    :param name: the run's folder under ``tb/`` (the scenario and those shared scenario settings).
    :param axes: the settings that vary over the sweep (scenario and policy ones).
    :param points: each point of the sweep (the axes' values, their Cartesian product) and its
        step: the axis' value where one axis sweeps whole numbers, else the point's index.
    :param at: step -> (policy label, aggregate) of every aggregate at that point: a policy
        lacking an axis (a baseline beside ``tiresias.round_s``) is at every point of it, so it
        draws a flat line beside the swept one.
    :param images: plots group -> the step of its images (its first point)."""

    name: str
    axes: tuple[str, ...]
    points: tuple[tuple[int, tuple[str, ...]], ...]
    at: dict[int, list[tuple[str, Aggregate]]]
    images: dict[str, int]


def sweep_runs(aggregates: Sequence[Aggregate]) -> list[SweepRun]:
    """The TensorBoard layout of a sweep: one :class:`SweepRun` per scenario, each setting of
    the sweep on its own step, so that a sweep reads as a curve."""
    by_scenario: dict[str, list[Aggregate]] = {}
    for a in aggregates:
        by_scenario.setdefault(a.scenario, []).append(a)
    runs = []
    for scenario, aggs in by_scenario.items():
        values: dict[str, list[str]] = {}
        for a in aggs:
            for k, v in a.settings:
                if v not in values.setdefault(k, []):
                    values[k].append(v)
        axes = tuple(k for k, vs in values.items() if len(vs) > 1)
        grid = list(itertools.product(*(values[k] for k in axes)))
        whole = [_whole(v) for v in values[axes[0]]] if len(axes) == 1 else []
        numbered = bool(whole) and None not in whole and len(set(whole)) == len(whole)
        steps = [cast(int, _whole(p[0])) if numbered else i for i, p in enumerate(grid)]
        at: dict[int, list[tuple[str, Aggregate]]] = {}
        images: dict[str, int] = {}
        for step, point in zip(steps, grid, strict=True):
            here = dict(zip(axes, point, strict=True))
            for a in aggs:
                mine = dict(a.settings)
                if all(mine[k] == v for k, v in here.items() if k in mine):
                    pol = [f"{k.split('.', 1)[1]}={v}" for k, v in a.policy_settings if k not in axes]
                    at.setdefault(step, []).append((a.policy + (" [" + ",".join(pol) + "]" if pol else ""), a))
                    images.setdefault(group_name(a.scenario, a.scenario_settings), step)
        shared = [(k, vs[0]) for k, vs in values.items() if len(vs) == 1]
        name = group_name(scenario, [kv for kv in shared if kv in aggs[0].scenario_settings])
        runs.append(SweepRun(name, axes, tuple(zip(steps, grid, strict=True)), at, images))
    return runs


def _whole(value: str) -> int | None:
    try:
        x = float(value)
    except ValueError:
        return None
    return int(x) if x.is_integer() else None


def write_tensorboard(aggregates: Sequence[Aggregate], pngs: Mapping[str, Sequence[Path]], tb: Path) -> None:
    """One run per scenario under ``tb`` (:func:`sweep_runs`): ``eval/<metric>/<policy>`` scalars
    (mean over seeds), each setting of a sweep on its own step, a ``sweep`` text table saying
    which settings each step holds, and the plots as images (``plots/<name>``, at their
    setting's step). Written with TensorBoard's own event writer (no torch import); ``tb`` is
    replaced as a whole, so a rerun leaves no stale events."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboard.compat.proto.types_pb2 import DT_STRING
    from tensorboard.plugins.text.metadata import create_summary_metadata
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    tmp = tb.with_name(f".{tb.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    runs = sweep_runs(aggregates)
    placed = {g: (run, step) for run in runs for g, step in run.images.items()}
    events: dict[str, dict[int, list[Summary.Value]]] = {run.name: {} for run in runs}
    for run in runs:
        for step, rows in run.at.items():
            events[run.name].setdefault(step, []).extend(
                Summary.Value(tag=f"eval/{k}/{label}", simple_value=a.metrics[k].mean)
                for label, a in rows
                for k in METRICS
                if a.metrics[k].mean is not None
            )
        if run.axes:
            table = "| step | " + " | ".join(run.axes) + " |\n|" + "---|" * (len(run.axes) + 1) + "\n"
            table += "".join(f"| {step} | " + " | ".join(point) + " |\n" for step, point in run.points)
            shape = TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)])
            text = TensorProto(dtype=DT_STRING, string_val=[table.encode()], tensor_shape=shape)
            meta = create_summary_metadata(display_name="sweep", description="the settings of each step")
            events[run.name].setdefault(0, []).append(Summary.Value(tag="sweep", metadata=meta, tensor=text))
    for group, files in pngs.items():
        run_name, step = (placed[group][0].name, placed[group][1]) if group in placed else (group, 0)
        for png in files:
            data = png.read_bytes()
            width, height = struct.unpack(">II", data[16:24])  # the PNG's IHDR chunk
            image = Summary.Image(height=height, width=width, colorspace=4, encoded_image_string=data)
            events.setdefault(run_name, {}).setdefault(step, []).append(
                Summary.Value(tag=f"plots/{png.stem}", image=image)
            )
    for run_name, by_step in events.items():
        writer = EventFileWriter(str(tmp / run_name))
        for step in sorted(by_step):
            writer.add_event(Event(wall_time=time.time(), step=step, summary=Summary(value=by_step[step])))
        writer.close()
    tmp.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(tb, ignore_errors=True)
    tmp.replace(tb)


def _short(sets: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in sets)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "-", text).strip("-") or "x"
