"""What the CLIs show on a terminal: the progress bar of train.py and evaluate.py."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


def progress_bar(console: Console, label: str) -> Progress:
    """A bar per task (shown on a terminal only, gone when done), each task's line headed by
    ``label`` (a format of the task, e.g. ``"seed {task.fields[seed]}"``)."""
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
