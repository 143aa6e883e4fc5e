"""Workloads: load and validate a CSV trace, fill in what it lacks, or generate one.

A workload reaches the engine in three steps:

1. **Rows.** :func:`load_trace` reads a trace in our CSV schema (below) into validated
   :class:`TraceRow` objects, sorted by submit time; :func:`generate` draws Philly/ITP-like
   rows from a :class:`SyntheticWorkload`; ``adapters.py`` converts the public trace formats.
2. **Jobs.** :func:`build_jobs` turns rows into :class:`~envs.sim.model.JobSpec` objects: every
   attribute the trace gives is kept, the rest is drawn by an :class:`AttributeSampler` from one
   seeded ``np.random.Generator``.
3. **Files.** :func:`write_trace` writes rows back in the schema, atomically, so that
   ``load_trace(write_trace(rows, path)) == rows``.

Trace schema (CSV with a header row, one row per job; column names are case-insensitive,
whitespace around a cell is ignored, columns may come in any order, unknown columns are ignored)

================  ========  =====================================================================
column            required  meaning
================  ========  =====================================================================
job_id            yes       the trace's own id (any non-empty text); must be unique in the file
submit_time_s     yes       submit time, seconds >= 0 on the trace clock (rows may be unsorted)
duration_s        yes       seconds the job runs alone on ``num_gpus`` reference GPUs, > 0
num_gpus          yes       GPUs requested, a positive integer (``8`` and ``8.0`` are accepted)
model_name        no        model name, selects the scaling curve
gpu_type          no        a GPU type name, ``A|B`` for any of several; an empty cell means *any*
job_class         no        ``te`` (trial-and-error) or ``be`` (best-effort), any case
priority          no        an integer, larger is more important
min_gpus          no        smallest allocation of an elastic job, 1 <= min_gpus <= num_gpus
max_gpus          no        largest allocation of an elastic job, >= num_gpus
deadline_s        no        ABSOLUTE time on the trace clock (the clock of ``submit_time_s``, not
                            seconds after submit) the job should finish by; > submit_time_s
grace_period_s    no        seconds a preempted job needs to checkpoint, >= 0
user, vc          no        owner and virtual cluster, free text
job_name          no        the trace's own name of the job's template or script (free text): jobs
                            of one user with one job name are taken as runs of one recurring
                            template (what a history-based duration predictor keys on)
================  ========  =====================================================================

Blank lines, and rows whose cells are all empty, are skipped; a UTF-8 byte-order mark is allowed.
An empty cell in an optional column means "not given" (the sampler fills it in), except in
``gpu_type``, where the schema defines an empty cell as "any type". Numbers must be finite
(``nan`` and ``inf`` are errors). Two rows with the same ``job_id`` are an error: the id is how
results are traced back to the trace. A file that breaks any rule raises :class:`TraceError` with
one sentence naming the file, the line (the header is line 1), the column and the problem.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from envs.sim import libm
from envs.sim.fileio import atomic_open
from envs.sim.model import GPU_TYPES, JobClass, JobSpec
from envs.sim.settings import Each, Items, Names, Num, Settings, Span, Text

__all__ = [
    "ANY_GPU_TYPE",
    "ITP_DURATION_MIXTURE",
    "ITP_GPU_DEMAND",
    "OPTIONAL_COLUMNS",
    "PHILLY_GPU_DEMAND",
    "REQUIRED_COLUMNS",
    "AttributeSampler",
    "SyntheticWorkload",
    "TraceError",
    "TraceRow",
    "build_jobs",
    "generate",
    "load_trace",
    "offered_load",
    "write_trace",
]

REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "submit_time_s", "duration_s", "num_gpus")
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "model_name",
    "gpu_type",
    "job_class",
    "priority",
    "min_gpus",
    "max_gpus",
    "deadline_s",
    "grace_period_s",
    "user",
    "vc",
    "job_name",
)

ANY_GPU_TYPE: frozenset[str] = frozenset()
"""``TraceRow.gpu_types`` value for "the trace says: any GPU type" (an empty ``gpu_type`` cell).

``None`` instead means the trace did not say, and the sampler decides.
"""


class TraceError(ValueError):
    """A bad trace file.

    ``str(err)`` is one sentence naming the file, the line (header = line 1) and the column where
    they apply, and what is wrong, e.g.
    ``"trace.csv, line 7, column num_gpus: expected a positive integer, got '0'."``
    """


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One validated trace row: what the trace gave, ``None`` where it gave nothing.

    :param name: the trace's own job id (``job_id`` column).
    :param submit_time: seconds on the trace clock, >= 0.
    :param duration: seconds alone on ``num_gpus`` reference GPUs, > 0.
    :param num_gpus: GPUs requested, >= 1.
    :param model: model name.
    :param gpu_types: allowed GPU type names; :data:`ANY_GPU_TYPE` (empty) if the trace says
        any type, ``None`` if the trace does not say.
    :param job_class: TE or BE.
    :param priority: larger is more important.
    :param min_gpus: smallest allocation of an elastic job (1..num_gpus).
    :param max_gpus: largest allocation of an elastic job (>= num_gpus).
    :param deadline: absolute time on the trace clock the job should finish by.
    :param grace_period: seconds a preempted job needs to checkpoint.
    :param user: owner.
    :param vc: virtual cluster (kept for analysis; ``JobSpec`` has no such field).
    :param job_name: the trace's name of the job's template or script (``JobSpec.template``).
    :param line: the row's line in its file (header = line 1), for error messages; ``None`` for
        rows that come from no file. Not part of equality.
    """

    name: str
    submit_time: float
    duration: float
    num_gpus: int
    model: str | None = None
    gpu_types: frozenset[str] | None = None
    job_class: JobClass | None = None
    priority: int | None = None
    min_gpus: int | None = None
    max_gpus: int | None = None
    deadline: float | None = None
    grace_period: float | None = None
    user: str | None = None
    vc: str | None = None
    job_name: str | None = None
    line: int | None = field(default=None, compare=False)

    def at(self, submit_time: float, deadline: float | None) -> TraceRow:
        """This row with another submit time and deadline: ``dataclasses.replace`` without its
        generic field walk, which a synthetic episode's reset would pay for every job."""
        return TraceRow(
            self.name,
            submit_time,
            self.duration,
            self.num_gpus,
            self.model,
            self.gpu_types,
            self.job_class,
            self.priority,
            self.min_gpus,
            self.max_gpus,
            deadline,
            self.grace_period,
            self.user,
            self.vc,
            self.job_name,
            self.line,
        )


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------

_SHOW_MAX = 40

SHARE = Num(ge=0, le=1)
GPU_TYPE = Names("GPU type", lambda: GPU_TYPES)
MIXTURE_RULE = "must be WEIGHT:MU:SIGMA;... with WEIGHT in [0, 1], MU in [-50, 50] and SIGMA >= 0"
MAX_JOBS = 1_000_000
"""The most jobs a synthetic workload draws (a larger one is a typo: it would take hours)."""
MAX_USERS = 100_000
MAX_TEMPLATES_PER_USER = 100
"""The most users and templates per user a synthetic workload draws (more is a typo: at the
largest, the ten million templates' arrays fill about a gigabyte)."""

MAX_SECONDS = 10 * 365 * 86400.0
"""The longest duration and the latest submit time a trace may give: ten years. Beyond it a
value is a unit mistake (milliseconds read as seconds) or junk, and the event loop would walk
the inference curve's steps for millions of simulated years."""
_TOO_LONG = f"of at most {MAX_SECONDS:,.0f} seconds (ten years)"


def _show(cell: str) -> str:
    """Quote a cell for an error message, shortened if long."""
    if len(cell) > _SHOW_MAX:
        cell = cell[: _SHOW_MAX - 3] + "..."
    return repr(cell)


class _Cells:
    """The cells of one data row, with parsers that raise a :class:`TraceError` naming the cell."""

    __slots__ = ("file", "index", "line", "record")

    def __init__(self, file: str, line: int, record: list[str], index: dict[str, int]) -> None:
        self.file = file
        self.line = line
        self.record = record
        self.index = index

    def error(self, column: str, problem: str) -> TraceError:
        return TraceError(f"{self.file}, line {self.line}, column {column}: {problem}.")

    def raw(self, column: str) -> str | None:
        """The stripped cell, or ``None`` if the file has no such column."""
        i = self.index.get(column)
        return None if i is None else self.record[i].strip()

    def text(self, column: str) -> str | None:
        cell = self.raw(column)
        return cell or None

    def number(self, column: str, *, required: bool) -> float | None:
        cell = self.raw(column)
        if cell is None or cell == "":
            if required:
                raise self.error(column, "expected a number, got an empty cell")
            return None
        try:
            value = float(cell)
        except ValueError:
            raise self.error(column, f"expected a number, got {_show(cell)}") from None
        if not math.isfinite(value):
            raise self.error(column, f"expected a finite number, got {_show(cell)}")
        return value

    def integer(self, column: str, *, required: bool, expected: str = "an integer") -> int | None:
        cell = self.raw(column)
        if cell is None or cell == "":
            if required:
                raise self.error(column, f"expected {expected}, got an empty cell")
            return None
        try:
            return int(cell)
        except ValueError:
            pass
        try:
            value = float(cell)
        except ValueError:
            raise self.error(column, f"expected {expected}, got {_show(cell)}") from None
        if not math.isfinite(value) or not value.is_integer():
            raise self.error(column, f"expected {expected}, got {_show(cell)}")
        return int(value)

    def positive_integer(self, column: str, *, required: bool) -> int | None:
        value = self.integer(column, required=required, expected="a positive integer")
        if value is not None and value < 1:
            raise self.error(column, f"expected a positive integer, got {_show(self.raw(column) or '')}")
        return value


def _records(file: str, text: str) -> Iterator[tuple[int, list[str]]]:
    """Yield (line number of the record's last line, fields), skipping blank lines."""
    reader = csv.reader(io.StringIO(text, newline=""))
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise TraceError(f"{file}, line {reader.line_num}: not valid CSV ({exc}).") from None
        if not record or all(not cell.strip() for cell in record):
            continue
        yield reader.line_num, record


def _read_text(file: str, path: str | os.PathLike[str]) -> str:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise TraceError(f"{file}: no such file.") from None
    except IsADirectoryError:
        raise TraceError(f"{file}: is a directory, not a CSV trace.") from None
    except OSError as exc:
        raise TraceError(f"{file}: cannot be read ({exc.strerror or exc}).") from None
    if not data:
        raise TraceError(f"{file}: the file is empty (0 bytes); expected a CSV trace with a header row.")
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise TraceError(f"{file}, line {line}: contains a NUL byte, so it is a binary file, not a CSV trace.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TraceError(
            f"{file}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}), "
            "so not a CSV trace."
        ) from None


def _parse_row(cells: _Cells, max_gpus_per_job: int | None, type_map: Mapping[str, str]) -> TraceRow:
    name = cells.text("job_id")
    if name is None:
        raise cells.error("job_id", "expected a job id, got an empty cell")
    submit = cells.number("submit_time_s", required=True)
    assert submit is not None
    if submit < 0:
        raise cells.error(
            "submit_time_s", f"expected a time >= 0 seconds, got {_show(cells.raw('submit_time_s') or '')}"
        )
    if submit > MAX_SECONDS:
        raise cells.error(
            "submit_time_s", f"expected a time {_TOO_LONG}, got {_show(cells.raw('submit_time_s') or '')}"
        )
    duration = cells.number("duration_s", required=True)
    assert duration is not None
    if duration <= 0:
        raise cells.error("duration_s", f"expected a duration > 0 seconds, got {_show(cells.raw('duration_s') or '')}")
    if duration > MAX_SECONDS:
        raise cells.error("duration_s", f"expected a duration {_TOO_LONG}, got {_show(cells.raw('duration_s') or '')}")
    num_gpus = cells.positive_integer("num_gpus", required=True)
    assert num_gpus is not None
    if max_gpus_per_job is not None and num_gpus > max_gpus_per_job:
        raise cells.error(
            "num_gpus",
            f"the job asks for {num_gpus} GPUs but the cluster has only {max_gpus_per_job} GPUs for one job",
        )

    gpu_types: frozenset[str] | None = None
    gpu_cell = cells.raw("gpu_type")
    if gpu_cell is not None:
        if gpu_cell == "":
            gpu_types = ANY_GPU_TYPE
        else:
            names = [part.strip() for part in gpu_cell.split("|")]
            if not all(names):
                raise cells.error("gpu_type", f"expected GPU type names separated by '|', got {_show(gpu_cell)}")
            names = [type_map.get(n, n) for n in names]
            unknown = [n for n in names if n not in GPU_TYPES]
            if unknown:
                raise cells.error(
                    "gpu_type",
                    f"unknown GPU type {_show(unknown[0])}; known types: {', '.join(GPU_TYPES)} (map the trace's "
                    f"own names with --set workload.gpu_type_map={unknown[0]}:{next(iter(GPU_TYPES))})",
                )
            gpu_types = frozenset(names)

    job_class: JobClass | None = None
    class_cell = cells.raw("job_class")
    if class_cell:
        try:
            job_class = JobClass[class_cell.upper()]
        except KeyError:
            raise cells.error("job_class", f"expected te or be, got {_show(class_cell)}") from None

    priority = cells.integer("priority", required=False)

    min_gpus = cells.positive_integer("min_gpus", required=False)
    if min_gpus is not None and min_gpus > num_gpus:
        raise cells.error("min_gpus", f"min_gpus {min_gpus} is more than num_gpus {num_gpus}")
    max_gpus = cells.positive_integer("max_gpus", required=False)
    if max_gpus is not None and max_gpus < num_gpus:
        raise cells.error("max_gpus", f"max_gpus {max_gpus} is less than num_gpus {num_gpus}")

    deadline = cells.number("deadline_s", required=False)
    if deadline is not None and deadline <= submit:
        raise cells.error(
            "deadline_s",
            f"deadline {deadline:g} is not after submit_time_s {submit:g} "
            "(deadline_s is an absolute time on the trace clock)",
        )
    grace = cells.number("grace_period_s", required=False)
    if grace is not None and grace < 0:
        raise cells.error("grace_period_s", f"expected seconds >= 0, got {_show(cells.raw('grace_period_s') or '')}")

    return TraceRow(
        name=name,
        submit_time=submit,
        duration=duration,
        num_gpus=num_gpus,
        model=cells.text("model_name"),
        gpu_types=gpu_types,
        job_class=job_class,
        priority=priority,
        min_gpus=min_gpus,
        max_gpus=max_gpus,
        deadline=deadline,
        grace_period=grace,
        user=cells.text("user"),
        vc=cells.text("vc"),
        job_name=cells.text("job_name"),
        line=cells.line,
    )


def load_trace(
    path: str | os.PathLike[str],
    max_gpus_per_job: int | None = None,
    gpu_type_map: Mapping[str, str] | None = None,
) -> list[TraceRow]:
    """Read and validate a trace in our CSV schema (see the module docstring).

    :param path: the CSV file.
    :param max_gpus_per_job: the most GPUs the cluster can give one job; a row asking for more is
        an error. ``None`` skips this check (``scenarios.build`` checks what the cluster can run).
    :param gpu_type_map: the trace's own GPU type names -> ours (``{"V100M32": "V100-32GB"}``);
        after it, every name in ``gpu_type`` must be one of :data:`~envs.sim.model.GPU_TYPES`.
    :return: the rows, sorted stably by submit time (ties keep the file's order).
    :raises TraceError: on any problem, with one sentence naming the file, line, column and what
        is wrong: missing or unreadable file, empty file, binary or non-UTF-8 content, missing
        required columns, a column named twice, a row with the wrong number of fields, an empty,
        non-numeric, non-finite, negative or zero value where that is not allowed, GPUs beyond
        ``max_gpus_per_job``, an unknown GPU type, a time beyond :data:`MAX_SECONDS`, an
        inconsistent elastic range, an unknown job class, a deadline not after submit, a repeated
        job id, or a header with no jobs under it.
    """
    if max_gpus_per_job is not None and max_gpus_per_job < 1:
        raise ValueError(f"max_gpus_per_job must be a positive integer, got {max_gpus_per_job!r}")
    types = dict(gpu_type_map or {})
    file = os.fspath(path)
    text = _read_text(file, path)
    records = _records(file, text)
    first = next(records, None)
    if first is None:
        raise TraceError(f"{file}: the file holds no header row (only blank lines).")
    header_line, header = first
    columns = [name.strip().lower() for name in header]
    index: dict[str, int] = {}
    for i, column in enumerate(columns):
        if column in REQUIRED_COLUMNS or column in OPTIONAL_COLUMNS:
            if column in index:
                raise TraceError(f"{file}, line {header_line}, column {column}: the header names this column twice.")
            index[column] = i
    missing = [column for column in REQUIRED_COLUMNS if column not in index]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        raise TraceError(
            f"{file}, line {header_line}: the header lacks the required column{plural} {', '.join(missing)} "
            f"(it has: {', '.join(columns) or 'nothing'})."
        )

    rows: list[TraceRow] = []
    seen: dict[str, int] = {}
    width = len(columns)
    for line, record in records:
        if len(record) != width:
            short = len(record) < width
            column = (columns[len(record)] or f"#{len(record) + 1}") if short else f"#{width + 1}"
            raise TraceError(
                f"{file}, line {line}, column {column}: the row has {len(record)} fields but the header has {width}."
            )
        row = _parse_row(_Cells(file, line, record, index), max_gpus_per_job, types)
        if row.name in seen:
            raise TraceError(
                f"{file}, line {line}, column job_id: job id {_show(row.name)} already appears "
                f"on line {seen[row.name]}."
            )
        seen[row.name] = line
        rows.append(row)
    if not rows:
        raise TraceError(f"{file}: the file has a header but no jobs.")
    rows.sort(key=lambda row: row.submit_time)
    return rows


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def _format_float(value: float) -> str:
    return repr(float(value))


def write_trace(rows: Sequence[TraceRow], path: str | os.PathLike[str]) -> Path:
    """Write rows in our CSV schema, atomically (a temp file in the same folder, then rename).

    The required columns are always written; an optional column is written when at least one row
    gives it. Floats are written with ``repr`` precision, so
    ``load_trace(write_trace(rows, p)) == sorted(rows)`` (stably by submit time).

    :param rows: the rows, in the order to write them.
    :param path: the CSV file to create or replace.
    :return: ``path`` as a :class:`~pathlib.Path`.
    :raises ValueError: if the rows cannot be expressed in the schema: an empty or repeated job
        name, a GPU type name that is empty or holds ``|``, or a ``gpu_type`` column where some
        rows give no type (the schema reads an empty cell as "any", so ``None`` cannot be written
        next to rows that give one).
    """
    names: set[str] = set()
    for row in rows:
        if not row.name.strip():
            raise ValueError(f"cannot write a job with an empty name: {row!r}")
        if row.name in names:
            raise ValueError(f"cannot write job name {row.name!r} twice: job ids must be unique")
        names.add(row.name)
        if row.gpu_types is not None:
            for gpu in row.gpu_types:
                if not gpu.strip() or "|" in gpu:
                    raise ValueError(f"job {row.name!r}: GPU type name {gpu!r} is empty or holds '|'")

    optional: dict[str, list[Any]] = {
        "model_name": [row.model for row in rows],
        "gpu_type": [row.gpu_types for row in rows],
        "job_class": [row.job_class for row in rows],
        "priority": [row.priority for row in rows],
        "min_gpus": [row.min_gpus for row in rows],
        "max_gpus": [row.max_gpus for row in rows],
        "deadline_s": [row.deadline for row in rows],
        "grace_period_s": [row.grace_period for row in rows],
        "user": [row.user for row in rows],
        "vc": [row.vc for row in rows],
        "job_name": [row.job_name for row in rows],
    }
    present = [column for column in OPTIONAL_COLUMNS if any(v is not None for v in optional[column])]
    if "gpu_type" in present and any(row.gpu_types is None for row in rows):
        raise ValueError(
            "cannot write a gpu_type column where some rows give no GPU type: an empty cell means 'any'; "
            "use ANY_GPU_TYPE for those rows or give every row a type"
        )

    def cell(column: str, value: object) -> str:
        if value is None:
            return ""
        if column == "gpu_type":
            assert isinstance(value, frozenset)
            return "|".join(sorted(value))
        if column == "job_class":
            assert isinstance(value, JobClass)
            return value.name.lower()
        if isinstance(value, float):
            return _format_float(value)
        return str(value)

    header = list(REQUIRED_COLUMNS) + present
    lines: list[list[str]] = [header]
    for i, row in enumerate(rows):
        out = [row.name, _format_float(row.submit_time), _format_float(row.duration), str(int(row.num_gpus))]
        out.extend(cell(column, optional[column][i]) for column in present)
        lines.append(out)

    target = Path(path)
    with atomic_open(target) as handle:
        csv.writer(handle, lineterminator="\n").writerows(lines)
    return target


# --------------------------------------------------------------------------------------------
# Attribute sampling
# --------------------------------------------------------------------------------------------

# Row of the uniform-draw matrix each sampled attribute reads (see build_jobs). Append new
# attributes at the end: the draws of the existing ones then stay the same for a given seed.
_U_MODEL, _U_ELASTIC, _U_ANY_GPU, _U_TE, _U_DEADLINE, _U_SLACK, _U_GRACE = range(7)
_NUM_DRAWS = 7


@dataclass(frozen=True)
class AttributeSampler(Settings):
    """Fills in what a trace lacks, from one ``np.random.Generator``.

    A trace column always wins: a field below is used only for jobs whose row leaves that
    attribute empty.

    :param elastic_models: models whose jobs may be elastic. Aryl (fig. 3): these scale well.
    :param elastic_fraction: probability that a job of an elastic model is elastic (Aryl treats
        every such job as elastic: 1.0).
    :param elastic_min_ratio: an elastic job's ``min_gpus = max(1, floor(num_gpus * ratio))``
        (its base demand; our choice: half the request).
    :param elastic_max_ratio: an elastic job's ``max_gpus = floor(num_gpus * ratio)``, clamped to
        the cluster's ``max_gpus_per_job`` (our choice: twice the request).
    :param any_gpu_fraction: probability that a job accepts any GPU type (Aryl: up to 21% of jobs
        can run on either training or inference GPUs).
    :param default_gpu_type: the type the other jobs are pinned to (the training pool's type).
    :param te_fraction: probability that an *eligible* job is trial-and-error (FitGpp's TE class);
        eligible means ``num_gpus <= te_max_gpus`` and ``duration <= te_max_duration``, so the
        overall TE share is ``te_fraction`` times the share of eligible jobs. 0 makes every job BE.
    :param te_max_gpus: largest TE job (FitGpp: TE jobs are small; the bound is our choice).
    :param te_max_duration: longest TE job in seconds (FitGpp: TE jobs are short; our choice).
    :param deadline_fraction: probability that a job gets a deadline (MLFS-style deadlines).
    :param deadline_slack: ``deadline = submit + U[lo, hi] * duration`` (our choice; ElasticFlow
        draws its deadlines the same way, with its own range).
    :param grace_period: checkpoint grace period ``U[lo, hi]`` seconds (FitGpp; range our choice).
    :param models: for jobs with no ``model_name``: drawn uniformly, as ElasticFlow did for the
        ITP trace (the shipped sample's ``model_name`` column is such a draw).
    """

    elastic_models: Annotated[frozenset[str], Each(Text())] = frozenset(
        {"resnet50", "vgg16", "bert", "imagenet", "gnmt16"}
    )
    elastic_fraction: Annotated[float, SHARE] = 1.0
    elastic_min_ratio: Annotated[float, Num(gt=0, le=1)] = 0.5
    elastic_max_ratio: Annotated[float, Num(ge=1)] = 2.0
    any_gpu_fraction: Annotated[float, SHARE] = 0.21
    default_gpu_type: Annotated[str, GPU_TYPE] = "V100-32GB"
    te_fraction: Annotated[float, SHARE] = 0.0
    te_max_gpus: Annotated[int, Num(ge=1)] = 2
    te_max_duration: Annotated[float, Num(gt=0)] = 3600.0
    deadline_fraction: Annotated[float, SHARE] = 0.0
    deadline_slack: Annotated[tuple[float, float], Span(Num(gt=0))] = (1.1, 3.0)
    grace_period: Annotated[tuple[float, float], Span(Num(ge=0))] = (30.0, 300.0)
    models: Annotated[tuple[str, ...], Each(Text(), min_items=1)] = (
        "resnet50",
        "vgg16",
        "gpt2",
        "inception3",
        "bert",
        "deepspeech2",
    )


def build_jobs(
    rows: Sequence[TraceRow],
    sampler: AttributeSampler,
    rng: np.random.Generator,
    max_gpus_per_job: int,
) -> list[JobSpec]:
    """Turn trace rows into jobs, keeping what the trace gives and sampling the rest.

    Jobs get dense ids 0..n-1 in submit order (rows are sorted stably by submit time first).
    Randomness: exactly one ``rng.random((7, n))`` call, whose row k holds job i's uniform draw
    for attribute k (model, elastic, any-GPU, TE, has-deadline, deadline slack, grace period).
    Every job consumes its draws whether or not the trace gives the attribute, so the same rows
    and seed give identical jobs, and adding a column to a trace does not change what is sampled
    for the other attributes.

    Per attribute, trace first, otherwise:

    - ``model``: uniform over ``sampler.models``. Jobs of one template (rows with the same
      ``user`` and ``job_name``) share the draw of the first of them in submit order: a template
      is one model's script. Rows without a ``job_name`` each keep their own draw.
    - ``min_gpus``/``max_gpus``: if the row gives either, the range comes from the trace (the
      missing end is ``num_gpus``). Otherwise a job of an elastic model is elastic with
      probability ``elastic_fraction`` and gets ``[max(1, floor(n * min_ratio)),
      floor(n * max_ratio)]``; any other job is inelastic. ``max_gpus`` is always clamped to
      ``max_gpus_per_job``, but never below ``num_gpus`` (a job asking for more than the
      cluster holds is kept as asked: ``scenarios.build`` finds it unrunnable).
    - ``gpu_types``: ``None`` (any) with probability ``any_gpu_fraction``, else
      ``{default_gpu_type}``. A trace's "any" (:data:`ANY_GPU_TYPE`) becomes ``None``.
    - ``job_class``: TE with probability ``te_fraction`` if ``num_gpus <= te_max_gpus`` and
      ``duration <= te_max_duration``, else BE.
    - ``deadline``: with probability ``deadline_fraction``,
      ``submit + U[deadline_slack] * duration``, else ``None``.
    - ``grace_period``: ``U[grace_period]``. ``priority``: 0. ``user``: ``""``.
    - ``template``: the row's ``job_name``, else ``""`` (never sampled).

    :param rows: trace rows (from :func:`load_trace`, :func:`generate` or an adapter).
    :param sampler: how to fill in missing attributes.
    :param rng: the only source of randomness.
    :param max_gpus_per_job: the most GPUs the cluster can give one job.
    :return: the jobs, ``job_id == index``.
    """
    if max_gpus_per_job < 1:
        raise ValueError(f"max_gpus_per_job must be a positive integer, got {max_gpus_per_job!r}")
    ordered = sorted(rows, key=lambda row: row.submit_time)
    n = len(ordered)
    draws = rng.random((_NUM_DRAWS, n)).tolist()
    u_model, u_elastic, u_any, u_te = draws[_U_MODEL], draws[_U_ELASTIC], draws[_U_ANY_GPU], draws[_U_TE]
    u_deadline, u_slack, u_grace = draws[_U_DEADLINE], draws[_U_SLACK], draws[_U_GRACE]
    models = sampler.models
    pinned = frozenset({sampler.default_gpu_type})
    slack_lo, slack_hi = sampler.deadline_slack
    grace_lo, grace_hi = sampler.grace_period

    template_models: dict[tuple[str | None, str], str] = {}
    jobs: list[JobSpec] = []
    for i, row in enumerate(ordered):
        n_gpus = row.num_gpus
        if row.model is not None:
            model = row.model
        else:
            model = models[min(int(u_model[i] * len(models)), len(models) - 1)]
            if row.job_name is not None:
                model = template_models.setdefault((row.user, row.job_name), model)

        if row.min_gpus is not None or row.max_gpus is not None:
            lo = row.min_gpus if row.min_gpus is not None else n_gpus
            hi = row.max_gpus if row.max_gpus is not None else n_gpus
        elif model in sampler.elastic_models and u_elastic[i] < sampler.elastic_fraction:
            lo = min(n_gpus, max(1, math.floor(n_gpus * sampler.elastic_min_ratio)))
            hi = max(n_gpus, math.floor(n_gpus * sampler.elastic_max_ratio))
        else:
            lo = hi = n_gpus
        hi = max(n_gpus, min(hi, max_gpus_per_job))

        gpu_types: frozenset[str] | None
        if row.gpu_types is not None:
            gpu_types = row.gpu_types or None
        else:
            gpu_types = None if u_any[i] < sampler.any_gpu_fraction else pinned

        if row.job_class is not None:
            job_class = row.job_class
        elif (
            n_gpus <= sampler.te_max_gpus and row.duration <= sampler.te_max_duration and u_te[i] < sampler.te_fraction
        ):
            job_class = JobClass.TE
        else:
            job_class = JobClass.BE

        deadline: float | None
        if row.deadline is not None:
            deadline = row.deadline
        elif u_deadline[i] < sampler.deadline_fraction:
            deadline = row.submit_time + (slack_lo + (slack_hi - slack_lo) * u_slack[i]) * row.duration
        else:
            deadline = None

        grace = row.grace_period if row.grace_period is not None else grace_lo + (grace_hi - grace_lo) * u_grace[i]

        jobs.append(
            JobSpec(
                job_id=i,
                name=row.name,
                submit_time=float(row.submit_time),
                duration=float(row.duration),
                num_gpus=n_gpus,
                min_gpus=lo,
                max_gpus=hi,
                model=model,
                gpu_types=gpu_types,
                job_class=job_class,
                priority=row.priority if row.priority is not None else 0,
                deadline=deadline,
                grace_period=grace,
                user=row.user if row.user is not None else "",
                template=row.job_name if row.job_name is not None else "",
            )
        )
    return jobs


# --------------------------------------------------------------------------------------------
# Synthetic workloads
# --------------------------------------------------------------------------------------------

PHILLY_GPU_DEMAND: tuple[tuple[int, float], ...] = (
    (1, 0.70),
    (2, 0.09),
    (4, 0.09),
    (8, 0.10),
    (16, 0.015),
    (32, 0.005),
)
"""GPUs per job, Philly-like: approximate shares reported for Microsoft's Philly trace (Jeon et
al., ATC'19): 1 GPU ~70%, 2 ~9%, 4 ~9%, 8 ~10%, 16 or more ~2% (split here 1.5% / 0.5%)."""

ITP_GPU_DEMAND: tuple[tuple[int, float], ...] = (
    (1, 1608 / 2000),
    (2, 10 / 2000),
    (4, 7 / 2000),
    (8, 343 / 2000),
    (16, 1 / 2000),
    (32, 31 / 2000),
)
"""GPUs per job, exactly as in the shipped ITP sample (``data/traces/itp_cluster04_2000.csv``)."""

ITP_DURATION_MIXTURE: tuple[tuple[float, float, float], ...] = (
    (0.3657, 9.1070, 1.3684),
    (0.4250, 8.8921, 0.0977),
    (0.2093, 9.6948, 0.0500),
)
"""Job duration: a mixture of log-normals, ``(weight, mu, sigma)`` of ln(seconds).

Fitted to the 2,000 durations of the shipped ITP sample (``data/traces/itp_cluster04_2000.csv``)
by EM on ln(duration_s): 3 Gaussian components, initial means at the 1/6, 1/2, 5/6 quantiles,
initial sigma = std/3, equal weights, 5,000 iterations, sigma floored at 0.05. The sample's
durations cluster tightly near 2 h and 4.5 h, which the two narrow components capture; the
broad one (median ~9,000 s) holds the short jobs and the heavy tail. Log-likelihood: -752 for
one log-normal, -436 for two, +400 for three. Quantiles, sample vs mixture (400,000 draws,
floored at 600 s): p10 3,341 / 3,975; p25 6,630 / 6,770; p50 8,039 / 7,851; p75 16,255 /
16,013; p90 18,950 / 20,526; p95 37,465 / 40,391; p99 145,263 / 124,952; mean 14,739 / 14,910.
A single log-normal (mu 9.139, sigma 0.883) would give median 9,327 and p90 28,856 instead.
"""


@dataclass(frozen=True)
class SyntheticWorkload(Settings):
    """A Philly/ITP-like synthetic trace: Poisson arrivals, a GPU-demand mix, log-normal durations.

    Arrivals: a Poisson process with mean rate ``arrival_rate_per_hour`` and optional diurnal
    modulation ``rate(t) = mean * (1 + diurnal_amplitude * cos(2 pi (t/3600 - diurnal_peak_hour)/24))``,
    t = 0 being midnight of day 0. With ``duration_days`` set, the window [0, duration_days) holds
    exactly ``num_jobs`` arrivals (the Poisson process conditioned on its count: i.i.d. times with
    density proportional to the rate, sorted), and ``arrival_rate_per_hour`` is ignored. Otherwise
    the first ``num_jobs`` arrivals of the process from t = 0 are taken. Diurnal modulation uses
    thinning / rejection sampling. Default rate: the shipped ITP sample's (2,000 jobs in 117.7 h).

    GPUs per job: drawn independently from ``gpu_demand`` (default :data:`PHILLY_GPU_DEMAND`;
    :data:`ITP_GPU_DEMAND` reproduces the shipped sample).

    Duration: drawn independently of the GPU count from the log-normal mixture
    ``duration_mixture`` (default :data:`ITP_DURATION_MIXTURE`, fitted to the shipped sample:
    median ~7,900 s, p90 ~20,500 s, heavy tail), clipped to ``[min_duration_s, max_duration_s]``
    (the raw ITP trace holds no job shorter than ~600 s) and rounded to whole seconds as traces
    record them.

    Rows carry only the trace columns a real trace of this kind has (id, submit, duration, GPUs,
    and with recurrence on, user and job name); :func:`build_jobs` samples the rest.

    Recurrence (``num_users > 0``; off by default: then none of its randomness is drawn and the
    rows are exactly those of the generator without it, for every seed). In real traces a few
    users submit most jobs, and jobs recur: a user resubmits the same script with the same
    resources and a similar duration. Helios (Hu et al., SC'21) estimates a job's duration from
    the earlier jobs of its user and job name (QSSF); Alibaba PAI (Weng et al., NSDI'22) tags
    instances of similar scripts, parameters and data as one recurring group. The model:

    - ``num_users`` users; user ``u`` (0 = the most active) submits a share of the jobs
      proportional to ``(u + 1) ** -activity_exponent`` (Zipf). With 100 users and exponent 1,
      the 5 most active submit 44% of the jobs and the 20 most active 69%.
    - Each user owns ``templates_per_user`` templates, used in the same Zipf proportions. Each
      job picks its user and template from these shares, independently of its arrival time, and
      its row carries ``user = "u3"`` and ``job_name = "u3-t1"`` (user 3's second template).
    - A template fixes the GPU count, drawn from ``gpu_demand``, and a duration level: a
      component ``k`` of ``duration_mixture`` (drawn with its weight) and a standard normal
      ``z``, drawn independently of the GPU count (as GPUs and durations are without templates).
      A job of the template lasts ``exp(mu_k + sigma_k * (sqrt(rho) * z + sqrt(1 - rho) * e))``
      seconds, ``e`` standard normal of its own: the template's duration
      ``exp(mu_k + sigma_k sqrt(rho) z)`` times a noise ``exp(sigma_k sqrt(1 - rho) e)``. Over
      template draws, a job's duration then has exactly the mixture's distribution, as without
      templates, and its GPU count exactly ``gpu_demand``; so ``E[GPUs x duration]``, from which
      the scenarios set the arrival rate for an offered load, is unchanged.
    - ``template_r2`` is the share of the variance of ln(duration) (before clipping) that the
      template explains: ``(Var(mu_K) + rho E[sigma_K^2]) / (Var(mu_K) + E[sigma_K^2])``, solved
      for ``rho``. Below the share the components alone explain (``Var(mu_K) / total``: 0.117
      for :data:`ITP_DURATION_MIXTURE`), ``rho`` is 0 and a job keeps its template's component
      only with probability ``sqrt(template_r2 / that share)``, else draws its own. The default
      0.6 is our assumption, not a published figure: durations of a recurring job are telling
      but far from fixed (runs fail, are stopped early, change hyper-parameters); sweep it.

    The templates' GPU counts and duration levels are placed by systematic sampling: templates
    in a random order, each covering its share of the jobs on [0, 1), a random start, and each
    template drawing at the middle of its interval (one placement for the GPU count, another,
    independent one for the duration level). Each template's draw is still exactly as above,
    but across one draw's templates the usage-weighted GPU mix and component mix are within the
    largest template's share of the targets. A single seed's offered load still varies more
    than without templates, since a few heavy templates carry many jobs; the marginals hold
    closely only when no template carries much of the load (many users, a mild exponent).

    :param num_jobs: how many jobs (at most :data:`MAX_JOBS`).
    :param duration_days: spread the jobs over this many days instead of using the rate.
    :param arrival_rate_per_hour: mean arrival rate.
    :param diurnal_amplitude: relative amplitude of the daily arrival cycle, in [0, 1); 0 = none.
    :param diurnal_peak_hour: hour of the day (0..24) arrivals peak at.
    :param gpu_demand: ``((num_gpus, probability), ...)``; probabilities sum to 1.
    :param duration_mixture: ``((weight, mu, sigma), ...)`` of ln(seconds); weights sum to 1.
    :param min_duration_s: shortest duration.
    :param max_duration_s: longest duration (default 7 days; the ITP sample's longest is 5.8).
    :param name_prefix: job names are ``f"{name_prefix}{i}"``.
    :param num_users: users submitting the jobs; 0 (default) turns recurrence off.
    :param templates_per_user: templates each user owns (our choice: a few).
    :param activity_exponent: Zipf exponent of users' activity and of each user's use of its
        templates; 0 = all alike (our choice: 1, the classic Zipf law).
    :param template_r2: share of the variance of ln(duration) the template explains, in [0, 1].
    """

    num_jobs: Annotated[int, Num(ge=1, le=MAX_JOBS)] = 2000
    duration_days: Annotated[float | None, Num(gt=0, le=MAX_SECONDS / 86400)] = None
    arrival_rate_per_hour: Annotated[float, Num(gt=0)] = 17.0
    diurnal_amplitude: Annotated[float, Num(ge=0, lt=1)] = 0.0
    diurnal_peak_hour: Annotated[float, Num(ge=0, lt=24)] = 14.0
    gpu_demand: Annotated[
        tuple[tuple[int, float], ...],
        Each(Items((Num(ge=1), SHARE)), 1, "must be GPUS:P;GPUS:P pairs with GPUS >= 1 and P in [0, 1]"),
    ] = PHILLY_GPU_DEMAND
    duration_mixture: Annotated[
        tuple[tuple[float, float, float], ...], Each(Items((SHARE, Num(ge=-50, le=50), Num(ge=0))), 1, MIXTURE_RULE)
    ] = ITP_DURATION_MIXTURE
    min_duration_s: Annotated[float, Num(gt=0, le=MAX_SECONDS)] = 600.0
    max_duration_s: Annotated[float, Num(gt=0, le=MAX_SECONDS)] = 7 * 86400.0
    name_prefix: Annotated[str, Text()] = "syn-"
    num_users: Annotated[int, Num(ge=0, le=MAX_USERS)] = 0
    templates_per_user: Annotated[int, Num(ge=1, le=MAX_TEMPLATES_PER_USER)] = 5
    activity_exponent: Annotated[float, Num(ge=0, le=10)] = 1.0
    template_r2: Annotated[float, SHARE] = 0.6

    def __post_init__(self) -> None:
        super().__post_init__()
        if not math.isclose(sum(p for _, p in self.gpu_demand), 1.0, abs_tol=1e-6):
            raise ValueError("SyntheticWorkload.gpu_demand probabilities must sum to 1")
        if not math.isclose(sum(w for w, _, _ in self.duration_mixture), 1.0, abs_tol=1e-3):
            raise ValueError("SyntheticWorkload.duration_mixture weights must sum to 1")
        if not self.min_duration_s <= self.max_duration_s:
            raise ValueError("SyntheticWorkload needs min_duration_s <= max_duration_s")


def _diurnal_accept(workload: SyntheticWorkload, times: np.ndarray) -> np.ndarray:
    """rate(t) / max rate, the thinning acceptance probability."""
    a = workload.diurnal_amplitude
    phase = 2.0 * np.pi * (times / 3600.0 - workload.diurnal_peak_hour) / 24.0
    return np.asarray((1.0 + a * np.cos(phase)) / (1.0 + a))


def _arrivals(workload: SyntheticWorkload, rng: np.random.Generator) -> np.ndarray:
    n = workload.num_jobs
    a = workload.diurnal_amplitude
    if workload.duration_days is not None:
        horizon = workload.duration_days * 86400.0
        if a == 0.0:
            return np.sort(rng.uniform(0.0, horizon, n))
        kept: list[np.ndarray] = []
        count = 0
        while count < n:
            batch = int((n - count) * (1.0 + a) * 1.1) + 16
            candidates = rng.uniform(0.0, horizon, batch)
            accepted = candidates[rng.random(batch) < _diurnal_accept(workload, candidates)]
            kept.append(accepted)
            count += accepted.size
        return np.sort(np.concatenate(kept)[:n])

    mean_gap = 3600.0 / workload.arrival_rate_per_hour
    if a == 0.0:
        return np.cumsum(rng.exponential(mean_gap, n))
    # Thinning: a homogeneous process at the peak rate, each point kept with prob rate(t)/peak.
    peak_gap = mean_gap / (1.0 + a)
    chunks: list[np.ndarray] = []
    count = 0
    start = 0.0
    while count < n:
        batch = int((n - count) * (1.0 + a) * 1.1) + 16
        candidates = start + np.cumsum(rng.exponential(peak_gap, batch))
        start = float(candidates[-1])
        accepted = candidates[rng.random(batch) < _diurnal_accept(workload, candidates)]
        chunks.append(accepted)
        count += accepted.size
    return np.concatenate(chunks)[:n]


def _cdf(probabilities: Sequence[float] | np.ndarray) -> np.ndarray:
    """The cumulative distribution of a categorical, normalised to end at exactly 1."""
    cdf = np.cumsum(np.asarray(probabilities, dtype=np.float64))
    cdf /= cdf[-1]
    return cdf


def _pick(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The category of each uniform ``u`` under ``cdf``."""
    return np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1)


def _zipf(k: int, exponent: float) -> np.ndarray:
    """Shares proportional to ``rank ** -exponent`` over ranks 1..k."""
    shares = np.arange(1, k + 1, dtype=np.float64) ** -exponent
    return np.asarray(shares / shares.sum())


def _placed(shares: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Systematic sampling: one point in [0, 1) per item, each uniform on its own, spread so that
    the items in any interval [a, b) have a total share within about the largest share of b - a.

    Items in a random order cover consecutive intervals of their shares; each gets its
    interval's middle, all shifted by one random start (mod 1)."""
    order = rng.permutation(shares.size)
    ordered = shares[order]
    points = np.empty_like(shares)
    points[order] = (np.cumsum(ordered) - ordered / 2.0 + rng.random()) % 1.0
    return points


def _template_split(weights: np.ndarray, mus: np.ndarray, sigmas: np.ndarray, r2: float) -> tuple[float, float]:
    """(probability a job keeps its template's component, rho) giving a template share ``r2`` of
    the variance of ln(duration); see :class:`SyntheticWorkload`."""
    w = weights / weights.sum()
    mean = float(w @ mus)
    between = float(w @ (mus - mean) ** 2)
    within = float(w @ sigmas**2)
    total = between + within
    if total == 0.0:  # every duration is the same: nothing to explain
        return 1.0, 0.0
    floor = between / total
    if r2 >= floor:
        rho = (r2 * total - between) / within if within > 0.0 else 0.0
        return 1.0, min(max(rho, 0.0), 1.0)
    return math.sqrt(r2 / floor), 0.0


def _recurring(
    workload: SyntheticWorkload,
    rng: np.random.Generator,
    gpu_values: np.ndarray,
    gpu_cdf: np.ndarray,
    mixture: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(GPUs, ln duration, template index) per job, with recurrence (:class:`SyntheticWorkload`).

    Template ``u * templates_per_user + j`` is user ``u``'s template ``j``. Draws, in order: the
    GPU placement (a permutation, a uniform), the duration placement (the same), then per job a
    uniform for its template, a uniform for keeping the template's component, a uniform for its
    own component and a standard normal."""
    from scipy.special import ndtri  # only here: importing scipy.special takes most of a second

    n = workload.num_jobs
    weights, mus, sigmas, comp_cdf = mixture
    per_user = workload.templates_per_user
    shares = np.outer(
        _zipf(workload.num_users, workload.activity_exponent), _zipf(per_user, workload.activity_exponent)
    )
    shares = shares.ravel()

    template_gpus = gpu_values[_pick(gpu_cdf, _placed(shares, rng))]
    level = _placed(shares, rng)
    template_comp = _pick(comp_cdf, level)
    below = np.concatenate(([0.0], comp_cdf[:-1]))[template_comp]
    within = (level - below) / (comp_cdf[template_comp] - below)
    tiny = np.finfo(np.float64).eps
    template_z = ndtri(np.clip(within, tiny, 1.0 - tiny))

    template = _pick(_cdf(shares), rng.random(n))
    keep = rng.random(n)
    own = _pick(comp_cdf, rng.random(n))
    noise = rng.standard_normal(n)
    stick, rho = _template_split(weights, mus, sigmas, workload.template_r2)
    comp = np.where(keep < stick, template_comp[template], own)
    z = math.sqrt(rho) * template_z[template] + math.sqrt(1.0 - rho) * noise
    return template_gpus[template], mus[comp] + sigmas[comp] * z, template


def generate(workload: SyntheticWorkload, rng: np.random.Generator) -> list[TraceRow]:
    """Draw a synthetic trace (see :class:`SyntheticWorkload` for the distributions).

    Draw order, fixed: arrival times; then, without recurrence (``num_users == 0``), GPU counts
    (one uniform per job), duration components (one uniform per job) and one standard normal per
    job; with recurrence, the templates' and the jobs' draws that :func:`_recurring` lists. Same
    workload and seed give the same rows, and the arrival times do not depend on recurrence.

    :param workload: what to draw.
    :param rng: the only source of randomness.
    :return: ``workload.num_jobs`` rows sorted by submit time, with ids, submit times, durations
        and GPU counts only, and with recurrence on, users and job names.
    """
    n = workload.num_jobs
    submit = _arrivals(workload, rng)

    gpu_values = np.array([g for g, _ in workload.gpu_demand], dtype=np.int64)
    gpu_cdf = _cdf([p for _, p in workload.gpu_demand])
    weights = np.array([w for w, _, _ in workload.duration_mixture])
    mus = np.array([m for _, m, _ in workload.duration_mixture])
    sigmas = np.array([s for _, _, s in workload.duration_mixture])
    comp_cdf = _cdf(weights)

    template: np.ndarray | None = None
    if workload.num_users == 0:
        gpus = gpu_values[_pick(gpu_cdf, rng.random(n))]
        comp = _pick(comp_cdf, rng.random(n))
        log_d = mus[comp] + sigmas[comp] * rng.standard_normal(n)
    else:
        gpus, log_d, template = _recurring(workload, rng, gpu_values, gpu_cdf, (weights, mus, sigmas, comp_cdf))
    duration = np.maximum(np.round(np.clip(libm.exp(log_d), workload.min_duration_s, workload.max_duration_s)), 1.0)

    prefix = workload.name_prefix
    triples = zip(submit.tolist(), duration.tolist(), gpus.tolist(), strict=True)
    if template is None:
        return [TraceRow(f"{prefix}{i}", s, d, g) for i, (s, d, g) in enumerate(triples)]
    per_user = workload.templates_per_user
    return [
        TraceRow(f"{prefix}{i}", s, d, g, user=f"u{t // per_user}", job_name=f"u{t // per_user}-t{t % per_user}")
        for i, ((s, d, g), t) in enumerate(zip(triples, template.tolist(), strict=True))
    ]


def offered_load(jobs: Sequence[TraceRow] | Sequence[JobSpec], training_gpus: int) -> float | None:
    """GPU-seconds asked (GPUs x duration) per second of the arrival window (first to last
    submit), as a share of ``training_gpus``; ``None`` if every job arrives at one instant."""
    submits = [j.submit_time for j in jobs]
    span = max(submits) - min(submits) if submits else 0.0
    if span <= 0.0 or training_gpus <= 0:
        return None
    return math.fsum(j.num_gpus * j.duration for j in jobs) / (span * training_gpus)
