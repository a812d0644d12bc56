"""The pure parts: durations, intent comparison, status reading, the version."""

from __future__ import annotations

import datetime as dt
import pathlib

import pytest

import sandbox_client as sbx
from sandbox_client._duration import parse_duration, rfc3339, shutdown_time
from sandbox_client._intent import build_spec, intent_difference, normalize_resources
from sandbox_client._state import classify, is_stale
from fakeapi import cond, ready_status, sandbox_obj


@pytest.mark.parametrize("text,secs", [("90s", 90), ("15m", 900), ("2h", 7200), ("1h30m", 5400), ("1d", 86400),
                                       ("45", 45), (30, 30), (dt.timedelta(minutes=2), 120), ("0.5h", 1800)])
def test_durations(text, secs):
    assert parse_duration(text).total_seconds() == secs


@pytest.mark.parametrize("bad", ["", "h", "1x", "1h 30m", "-1h", "0s", True, None])
def test_bad_durations(bad):
    with pytest.raises((ValueError, TypeError)):
        parse_duration(bad)


def test_shutdown_time_rounds_up_to_whole_seconds():
    now = dt.datetime(2026, 5, 1, 10, 0, 0, 250000, tzinfo=dt.timezone.utc)
    assert shutdown_time("1h", now) == "2026-05-01T11:00:01Z"
    assert rfc3339(dt.datetime(2026, 5, 1, 12, 0, 0)) == "2026-05-01T12:00:00Z"


def test_resources_shorthand():
    assert normalize_resources({"cpu": 1, "memory": "1Gi"}) == {"requests": {"cpu": "1", "memory": "1Gi"},
                                                                "limits": {"cpu": "1", "memory": "1Gi"}}
    with pytest.raises(ValueError):
        normalize_resources({"cpu": 1, "limits": {}})
    with pytest.raises(TypeError):
        normalize_resources({"cpu": True})


def test_intent_compares_what_was_sent_not_bytes():
    sent = build_spec("img", key="k", owner="alice", env={"A": "1"})
    stored = dict(sent, resources={"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2",
                                                                                       "memory": "4Gi"}},
                  lifecycle={"suspend": True})
    assert intent_difference(sent, stored) is None
    assert "spec.env" in (intent_difference(sent, dict(stored, env=[{"name": "A", "value": "2"}])) or "")
    assert "spec.args" in (intent_difference(sent, dict(stored, args=[])) or "")


def test_network_profiles_in_the_spec():
    spec = build_spec("img", network_profiles=["web", "db"])
    assert spec["network"] == {"profiles": ["web", "db"]}
    assert "network" not in build_spec("img")
    with pytest.raises(TypeError):
        build_spec("img", network_profiles="web")
    assert "spec.network" in (intent_difference(spec, dict(spec, network={"profiles": ["web"]})) or "")


def test_status_of_an_older_generation_is_stale():
    assert is_stale(sandbox_obj(generation=2, status=ready_status(gen=1)))
    assert not is_stale(sandbox_obj(generation=2, status=ready_status(gen=2)))
    assert is_stale(sandbox_obj(generation=1))


def test_rejected_is_final_even_when_stale():
    o = sandbox_obj(generation=2, status={"phase": "Rejected", "observedGeneration": 1,
                                          "conditions": [cond("Bound", "False", "InvalidSpec", "bad")]})
    assert isinstance(classify(o).error, sbx.Rejected)


def test_the_versions_agree():
    here = pathlib.Path(__file__).resolve().parent
    pyproject = (here.parent / "pyproject.toml").read_text()
    root = next((p for p in here.parents if (p / "VERSION").is_file() and (p / "CMakeLists.txt").is_file()), None)
    if root is None:
        pytest.skip("not inside the repository")
    version = (root / "VERSION").read_text().strip()
    assert f'version = "{version}"' in pyproject
    assert sbx.__version__ == version
