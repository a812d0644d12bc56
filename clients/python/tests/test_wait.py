"""Waiting by watch: one read, then a watch from its resourceVersion; typed
errors for states that never become Ready; broken watches re-opened."""

from __future__ import annotations

import copy

import pytest
import urllib3

import sandbox_client as sbx
from fakeapi import (ONE, SANDBOXES, BrokenBody, Clock, FakeApi, client, cond, pending_status, ready_status,
                     sandbox_obj, status)


def created(req):
    o = copy.deepcopy(req.body)
    o["metadata"].update(uid=f"uid-{o['metadata']['name']}", generation=1, resourceVersion="5")
    return 201, o


def ev(t, obj):
    return {"type": t, "object": obj}


def advance_per_watch(c, clock, seconds):
    """The fake watches end at once: each one moves the clock on, as a real
    watch that saw nothing would have taken that long."""
    orig = c.rest.watch

    def watch(*a, **k):
        clock.now += seconds
        return orig(*a, **k)

    c.rest.watch = watch


def test_create_watches_from_the_created_version_without_polling():
    def watch(req):
        n = req.query["fieldSelector"][0].split("=", 1)[1]
        return 200, [ev("MODIFIED", sandbox_obj(n, rv="7", status=pending_status())),
                     ev("MODIFIED", sandbox_obj(n, rv="8", status=ready_status()))]

    api = FakeApi().on("POST", SANDBOXES, created).on("GET", SANDBOXES, watch)
    sb = client(api).create("img:1")
    assert sb.ready and sb.pod_name == "sbx-0123"
    (w,) = api.of("GET", SANDBOXES)
    assert w.query["watch"] == ["1"] and w.query["resourceVersion"] == ["5"]
    assert w.query["fieldSelector"] == [f"metadata.name={sb.name}"]
    assert not api.of("GET", ONE)  # no polling


def test_wait_ready_watches_from_the_version_last_read():
    api = (FakeApi().on("GET", ONE, (200, sandbox_obj("s1", rv="6")), repeat_last=True)
           .on("GET", SANDBOXES, (200, [ev("MODIFIED", sandbox_obj("s1", rv="8", status=ready_status()))])))
    sb = client(api).get("s1").wait_ready()
    assert sb.ready and len(api.of("GET", ONE)) == 2
    assert api.of("GET", SANDBOXES)[0].query["resourceVersion"] == ["6"]


def test_a_ready_sandbox_needs_no_watch():
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("s1", status=ready_status())), repeat_last=True)
    sb = client(api).get("s1").wait_ready()
    assert sb.ready and not api.of("GET", SANDBOXES)


def test_watch_expired_410_reads_afresh():
    api = (FakeApi()
           .on("GET", ONE, (200, sandbox_obj("s1", rv="1")), (200, sandbox_obj("s1", rv="1")),
               (200, sandbox_obj("s1", rv="50")))
           .on("GET", SANDBOXES,
               (200, [ev("ERROR", status(410, "Expired", "too old resource version: 1 (40)"))]),
               (200, [ev("MODIFIED", sandbox_obj("s1", rv="51", status=ready_status()))])))
    client(api).get("s1").wait_ready()
    w1, w2 = api.of("GET", SANDBOXES)
    assert w1.query["resourceVersion"] == ["1"] and w2.query["resourceVersion"] == ["50"]


def test_a_wait_never_takes_another_sandbox_of_the_name():
    """Read afresh (the watch too old), the name holds another Sandbox (this
    one deleted, another made under its name): not this one's Ready, and
    nothing is later written to the other one."""
    other = sandbox_obj("s1", rv="50", uid="uid-other", spec={"idempotencyKey": "other"}, status=ready_status())
    api = (FakeApi()
           .on("GET", ONE, (200, sandbox_obj("s1", rv="1")), (200, sandbox_obj("s1", rv="1")), (200, other))
           .on("GET", SANDBOXES, (200, [ev("ERROR", status(410, "Expired", "too old"))])))
    sb = client(api).get("s1")
    with pytest.raises(sbx.NotFound) as e:
        sb.wait_ready()
    assert "uid-other" in str(e.value) and sb.uid == "uid-s1"


def test_a_watch_event_of_another_sandbox_of_the_name_is_not_this_one():
    other = sandbox_obj("s1", rv="9", uid="uid-other", status=ready_status())
    api = (FakeApi().on("GET", ONE, (200, sandbox_obj("s1", rv="2")), repeat_last=True)
           .on("GET", SANDBOXES, (200, [ev("ADDED", other)])))
    with pytest.raises(sbx.NotFound):
        client(api).get("s1").wait_ready()


def test_wait_ready_reads_the_sandbox_again():
    """A copy read Ready earlier says nothing of now: it expired since."""
    expired = {"phase": "Expired", "observedGeneration": 1,
               "conditions": [cond("Ready", "False", "Expired", "shutdownTime passed")]}
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("s1", status=ready_status())),
                       (200, sandbox_obj("s1", rv="20", status=expired)))
    sb = client(api).get("s1")
    assert sb.ready
    with pytest.raises(sbx.Expired):
        sb.wait_ready()


def test_a_broken_watch_is_reopened():
    line = b'{"type":"MODIFIED","object":{"metadata":{"name":"s1","namespace":"team-a","generation":1,' \
           b'"resourceVersion":"3"}}}\n'
    api = (FakeApi()
           .on("GET", ONE, (200, sandbox_obj("s1", rv="2")), (200, sandbox_obj("s1", rv="2")),
               (200, sandbox_obj("s1", rv="4")))
           .on("GET", SANDBOXES, (200, BrokenBody(line)),
               (200, [ev("MODIFIED", sandbox_obj("s1", rv="5", status=ready_status()))])))
    clock = Clock()
    client(api, clock).get("s1").wait_ready()
    assert len(api.of("GET", SANDBOXES)) == 2 and clock.sleeps


@pytest.mark.parametrize("code,reason", [(500, "InternalError"), (504, "Timeout"), (429, "TooManyRequests")])
def test_a_transient_error_event_reopens_the_watch(code, reason):
    api = (FakeApi().on("GET", ONE, (200, sandbox_obj("s1", rv="2")), repeat_last=True)
           .on("GET", SANDBOXES, (200, [ev("ERROR", status(code, reason, "etcdserver: request timed out"))]),
               (200, [ev("MODIFIED", sandbox_obj("s1", rv="3", status=ready_status()))])))
    clock = Clock()
    assert client(api, clock).get("s1").wait_ready().ready
    assert len(api.of("GET", SANDBOXES)) == 2 and clock.sleeps


def test_a_refusing_error_event_ends_the_wait():
    api = (FakeApi().on("GET", ONE, (200, sandbox_obj("s1", rv="2")), repeat_last=True)
           .on("GET", SANDBOXES, (200, [ev("ERROR", status(403, "Forbidden", "no watch for you"))])))
    with pytest.raises(sbx.Forbidden) as e:
        client(api).get("s1").wait_ready()
    assert "no watch for you" in str(e.value) and e.value.status == 403


def test_a_refused_watch_connection_is_retried():
    api = (FakeApi()
           .on("GET", ONE, (200, sandbox_obj("s1", rv="2")), repeat_last=True)
           .on("GET", SANDBOXES, urllib3.exceptions.NewConnectionError(None, "refused"),
               (200, [ev("MODIFIED", sandbox_obj("s1", rv="5", status=ready_status()))])))
    client(api).get("s1").wait_ready()


def test_bookmarks_move_the_resume_version():
    api = (FakeApi().on("GET", ONE, (200, sandbox_obj("s1", rv="2")), repeat_last=True)
           .on("GET", SANDBOXES, (200, [ev("BOOKMARK", {"metadata": {"resourceVersion": "90"}})]),
               (200, [ev("MODIFIED", sandbox_obj("s1", rv="91", status=ready_status()))])))
    client(api).get("s1").wait_ready()
    assert api.of("GET", SANDBOXES)[1].query["resourceVersion"] == ["90"]


def test_a_status_older_than_the_generation_is_not_trusted():
    old = sandbox_obj("s1", generation=2, rv="2", status=ready_status(gen=1))
    api = (FakeApi().on("GET", ONE, (200, old), repeat_last=True)
           .on("GET", SANDBOXES, (200, [ev("MODIFIED", sandbox_obj("s1", generation=2, rv="3",
                                                                    status=ready_status(gen=2)))])))
    client(api).get("s1").wait_ready()
    assert len(api.of("GET", SANDBOXES)) == 1


def _terminal(st, cls, text):
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("s1", rv="2")), repeat_last=True).on(
        "GET", SANDBOXES, (200, [ev("MODIFIED", sandbox_obj("s1", rv="3", status=st))]))
    with pytest.raises(cls) as e:
        client(api).get("s1").wait_ready()
    assert text in str(e.value) and e.value.name == "s1" and e.value.namespace == "team-a"
    return e.value


def test_key_conflict_is_raised_with_the_controllers_message():
    msg = "idempotency key task-42 is held by Sandbox alice with a different spec"
    e = _terminal({"phase": "Rejected", "observedGeneration": 1,
                   "conditions": [cond("Bound", "False", "IdempotencyKeyConflict", msg)]},
                  sbx.IdempotencyKeyConflict, msg)
    assert e.reason == "IdempotencyKeyConflict"


def test_invalid_spec_is_rejected():
    _terminal({"phase": "Rejected", "observedGeneration": 1,
               "conditions": [cond("Bound", "False", "InvalidSpec", "runtime class kata is not allowed")]},
              sbx.Rejected, "runtime class kata")


@pytest.mark.parametrize("phase", ["Pending", "Rejected"])  # Rejected: a run the controller refused
def test_owner_not_authorized_from_the_controller(phase):
    e = _terminal({"phase": phase, "observedGeneration": 1,
                   "conditions": [cond("Bound", "False", "OwnerNotAuthorized", "no valid authorization record")]},
                  sbx.OwnerNotAuthorized, "authorization record")
    assert e.status is None and e.reason == "OwnerNotAuthorized"


def test_network_profile_refused_by_the_controller_is_rejected():
    e = _terminal({"phase": "Rejected", "observedGeneration": 1,
                   "conditions": [cond("Bound", "False", "NetworkProfileNotAuthorized", "network profiles web: no record")]},
                  sbx.Rejected, "network profiles web")
    assert e.reason == "NetworkProfileNotAuthorized"


def test_quota_exceeded_from_the_controller():
    e = _terminal({"phase": "Rejected", "observedGeneration": 1,
                   "conditions": [cond("Bound", "False", "QuotaExceeded", "alice holds 3 of 3 active sandboxes")]},
                  sbx.QuotaExceeded, "3 of 3")
    assert e.reason == "QuotaExceeded" and e.status is None


def test_foreign_pod_conflict():
    _terminal({"phase": "Pending", "observedGeneration": 1,
               "conditions": [cond("Bound", "False", "ForeignPodConflict", "pod sbx-1 carries no valid seal")]},
              sbx.ForeignPodConflict, "no valid seal")


def test_expired():
    _terminal({"phase": "Expired", "observedGeneration": 1,
               "conditions": [cond("Ready", "False", "Expired", "shutdownTime 2026-05-01T10:00:00Z passed")]},
              sbx.Expired, "shutdownTime")


@pytest.mark.parametrize("phase,reason", [("Failed", "PodMissing"), ("Succeeded", "PodSucceeded"),
                                          ("Running", "PodTampered")])
def test_failed_pods(phase, reason):
    _terminal({"phase": phase, "podName": "sbx-1", "observedGeneration": 1,
               "conditions": [cond("Bound", "True", "PodCreated"), cond("Ready", "False", reason, "the pod x")]},
              sbx.SandboxFailed, "the pod x")


def test_waiting_is_not_an_error():
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("s1", rv="2")), repeat_last=True).on(
        "GET", SANDBOXES, (200, [ev("MODIFIED", sandbox_obj("s1", rv="3", status={
            "phase": "Pending", "observedGeneration": 1,
            "conditions": [cond("Bound", "False", "Waiting", "pods is forbidden: exceeded quota")]}))]),
        repeat_last=True)
    clock = Clock()
    c = client(api, clock)
    sb = c.get("s1")
    advance_per_watch(c, clock, 5)
    with pytest.raises(sbx.WaitTimeout) as e:
        sb.wait_ready(timeout=20)
    assert "exceeded quota" in str(e.value) and isinstance(e.value, TimeoutError)


def test_deleted_while_waiting():
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("s1", rv="2")), repeat_last=True).on(
        "GET", SANDBOXES, (200, [ev("DELETED", sandbox_obj("s1", rv="3"))]))
    with pytest.raises(sbx.NotFound):
        client(api).get("s1").wait_ready()


def test_a_suspended_sandbox_never_becomes_ready_by_waiting():
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("s1", rv="2", spec={"lifecycle": {"suspend": True}},
                                                     status={"phase": "Suspended", "observedGeneration": 1})), repeat_last=True)
    with pytest.raises(sbx.NotReady):
        client(api).get("s1").wait_ready()


def test_create_wait_timeout_covers_retries_and_wait():
    api = (FakeApi().on("POST", SANDBOXES, created)
           .on("GET", ONE, lambda req: (200, sandbox_obj(req.path.rsplit("/", 1)[1], rv="2")), repeat_last=True)
           .on("GET", SANDBOXES, (200, []), repeat_last=True))
    clock = Clock()
    c = client(api, clock)
    advance_per_watch(c, clock, 30)
    with pytest.raises(sbx.WaitTimeout) as e:
        c.create("img:1", timeout=100)
    assert "no status yet" in str(e.value)
    assert len(api.of("GET", SANDBOXES)) == 4
