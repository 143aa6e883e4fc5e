"""Every setting says what its values mean, and a value that means nothing is one sentence.

The table is every dataclass field of every settings class that ``--set`` reaches: the named
scenarios and all their parts, and every registered policy's config. A field without a rule fails
here, so a new field cannot be added without one; every rule's breaking value must be refused with
a sentence that names the key.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envs.sim import scenarios
from envs.sim.config import ConfigError, apply_overrides, parse_value
from envs.sim.settings import Rule, Settings, rules_of
from heuristics import registry

ROOT = Path(__file__).resolve().parent.parent


def _fields(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any, str, Rule | None]]:
    """(dotted key, owning instance, field, rule) of every leaf field below ``obj``."""
    for name, rule in rules_of(type(obj)):
        value = getattr(obj, name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from _fields(value, f"{prefix}{name}.")
        else:
            yield prefix + name, obj, name, rule


def _table() -> list[tuple[str, str, Any, str, Rule | None]]:
    """(where, dotted key, owner, field, rule): scenarios' fields, then policies'."""
    rows = [(f"scenario {n}", *f) for n in scenarios.names() for f in _fields(scenarios.get(n))]
    for n in registry.names():
        config = registry.entry(n).config
        if config is not None:
            rows += [(f"policy {n}", *f) for f in _fields(config())]
    return rows


TABLE = _table()


def test_the_table_covers_every_settings_class():
    owners = {type(owner) for _, _, owner, _, _ in TABLE}
    assert all(issubclass(c, Settings) for c in owners), [c for c in owners if not issubclass(c, Settings)]
    names = {c.__name__ for c in owners}
    assert {"ClusterConfig", "InferenceConfig", "WorkloadConfig", "SyntheticWorkload", "AttributeSampler"} <= names
    assert {"SimConfig", "MlFeatures", "DynamicConfig", "TiresiasConfig", "ShockwaveConfig", "MlfsConfig"} <= names


def test_every_field_has_a_rule():
    missing = sorted({f"{type(o).__name__}.{f}" for _, _, o, f, r in TABLE if r is None})
    assert not missing, f"fields without a rule: {missing}"


def test_every_default_keeps_its_rule():
    for where, key, owner, field, rule in TABLE:
        value = getattr(owner, field)
        assert rule is not None and (value is None or rule.ok(value)), (where, key, value)


_BAD = sorted({(where, key, rule.bad) for where, key, _, _, rule in TABLE if rule is not None and rule.bad is not None})


@pytest.mark.parametrize(("where", "key", "bad"), _BAD)
def test_a_value_that_breaks_the_rule_is_one_sentence_naming_the_key(where: str, key: str, bad: str):
    with pytest.raises(ConfigError) as info:
        if where.startswith("scenario "):
            scenarios.get(where.removeprefix("scenario "), {key: bad})
        else:
            registry.make(where.removeprefix("policy "), {key: bad})
    message = str(info.value)
    assert f"'{key}" in message or f"'{key.rsplit('.', 1)[-1]}" in message, message
    assert message.endswith(".") and "\n" not in message


def test_a_rules_own_good_example_passes_it():
    seen = set()
    for _, key, owner, field, rule in TABLE:
        if rule is None or rule.bad is None or (type(owner), field) in seen:
            continue
        seen.add((type(owner), field))
        hint = typing.get_type_hints(type(owner))[field]
        assert rule.ok(parse_value(rule.good, hint, key)), (key, rule.good)


@pytest.mark.parametrize(
    ("setting", "words"),
    [
        ("workload.num_jobs=-5", "'workload.num_jobs=-5' must be >= 0"),
        ("workload.load=-1", "'workload.load=-1' must be in [0, 100]"),
        ("sim.horizon_s=-10", "must be > 0"),
        ("sim.mtbf_h=-1", "must be >= 0"),
        ("sim.sample_s=-1", "must be >= 0"),
        ("inference.peak_to_trough=0.5", "must be >= 1"),
        ("inference.step_s=0", "'inference.step_s=0' must be >= 1"),
        ("cluster.inference_servers=-1", "'cluster.inference_servers=-1'"),
        ("policy.round_s=-60", "'round_s=-60' must be >= 1"),
    ],
)
def test_the_issues_nonsense_settings_exit_2_with_one_sentence(setting: str, words: str, tmp_path: Path):
    out = tmp_path / "out"
    cmd = [sys.executable, "evaluate.py", "--policies", "tiresias", "--set", setting, "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    text = " ".join(proc.stdout.split())
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert text.startswith("error:") and words in text and "Traceback" not in proc.stderr + proc.stdout
    assert "training server" not in text
    assert not out.exists()


def test_apply_overrides_names_a_rule_broken_by_another_field():
    """A rule across fields (min <= max) names the key that was set."""
    with pytest.raises(ConfigError, match=r"'workload.synthetic.min_duration_s=9e9'"):
        apply_overrides(scenarios.get("default"), {"workload.synthetic.min_duration_s": "9e9"})
