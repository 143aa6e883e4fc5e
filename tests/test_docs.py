"""The README documents every reported metric, and nothing else as one."""

import re
from pathlib import Path

from envs.sim.metrics import METRICS

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_metric_table_matches_the_metrics_module():
    text = README.read_text(encoding="utf-8")
    table = text.split("| key | unit | meaning |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9_]+)` \|", table, flags=re.M)
    assert rows == list(METRICS)
