"""suspend, resume, extend (merge patches of spec.lifecycle), delete, the
context manager, get and list."""

from __future__ import annotations

import datetime as dt

import pytest
import urllib3

import sandbox_client as sbx
from fakeapi import ONE, SANDBOXES, FakeApi, client, cond, ready_status, sandbox_obj, status
from sandbox_client._duration import parse_rfc3339


def patched(spec_lc, **kw):
    def answer(req):
        o = sandbox_obj("s1", generation=2, rv="20", spec={"lifecycle": req.body["spec"]["lifecycle"]}, **kw)
        return 200, o
    return answer


def base_api():
    return FakeApi().on("GET", ONE, (200, sandbox_obj("s1", status=ready_status())))


def delete_api():
    """base_api with the read a delete makes first: the same Sandbox there."""
    return base_api().on("GET", ONE, (200, sandbox_obj("s1", status=ready_status())))


def test_suspend_is_a_strict_merge_patch_of_lifecycle():
    api = base_api().on("PATCH", ONE, patched(None))
    sb = client(api).get("s1").suspend()
    (p,) = api.of("PATCH")
    assert p.body == {"spec": {"lifecycle": {"suspend": True}}, "metadata": {"uid": "uid-s1"}}
    assert p.headers["Content-Type"] == "application/merge-patch+json"
    assert p.query["fieldValidation"] == ["Strict"]
    assert sb.spec["lifecycle"] == {"suspend": True}


def test_suspend_can_wait_for_suspended():
    api = (base_api().on("PATCH", ONE, patched(None))
           .on("GET", SANDBOXES, (200, [{"type": "MODIFIED", "object": sandbox_obj(
               "s1", generation=2, rv="21", spec={"lifecycle": {"suspend": True}},
               status={"phase": "Suspended", "observedGeneration": 2,
                       "conditions": [cond("Ready", "False", "Suspended")]})}])))
    sb = client(api).get("s1").suspend(wait=True)
    assert sb.phase == "Suspended"
    assert api.of("GET", SANDBOXES)[0].query["resourceVersion"] == ["20"]


def test_resume_waits_past_the_stale_suspended_status_until_ready():
    stale = {"phase": "Suspended", "observedGeneration": 2, "conditions": [cond("Ready", "False", "Suspended")]}
    api = (base_api().on("PATCH", ONE, lambda req: (200, sandbox_obj(
        "s1", generation=3, rv="30", spec={"lifecycle": {"suspend": False}}, status=stale)))
           .on("GET", SANDBOXES, (200, [
               {"type": "MODIFIED", "object": sandbox_obj("s1", generation=3, rv="31",
                                                          spec={"lifecycle": {"suspend": False}},
                                                          status={"phase": "Pending", "observedGeneration": 3})},
               {"type": "MODIFIED", "object": sandbox_obj("s1", generation=3, rv="32",
                                                          spec={"lifecycle": {"suspend": False}},
                                                          status=ready_status(gen=3))}])))
    sb = client(api).get("s1").resume()
    assert api.of("PATCH")[0].body == {"spec": {"lifecycle": {"suspend": False}}, "metadata": {"uid": "uid-s1"}}
    assert sb.ready


def test_extend_sets_shutdown_time_from_now():
    api = base_api().on("PATCH", ONE, patched(None))
    sb = client(api).get("s1").extend("90m")
    t = parse_rfc3339(api.of("PATCH")[0].body["spec"]["lifecycle"]["shutdownTime"])
    left = (t - dt.datetime.now(dt.timezone.utc)).total_seconds()
    assert 5390 < left <= 5401
    assert sb.shutdown_time == t


def test_extend_until_and_argument_checks():
    api = base_api().on("PATCH", ONE, patched(None))
    sb = client(api).get("s1")
    sb.extend(until=dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc))
    assert api.of("PATCH")[0].body["spec"]["lifecycle"]["shutdownTime"] == "2030-01-02T03:04:05Z"
    with pytest.raises(ValueError):
        sb.extend()
    with pytest.raises(ValueError):
        sb.extend("1h", until=dt.datetime.now())
    with pytest.raises(ValueError):
        sb.extend("-5m")


def test_a_lifecycle_patch_is_retried_and_its_refusal_typed():
    api = base_api().on("PATCH", ONE, (503, status(503, "ServiceUnavailable", "x")), patched(None),
                        (422, status(422, "Invalid", "spec is immutable after creation")))
    sb = client(api).get("s1")
    sb.suspend()
    assert len(api.of("PATCH")) == 2
    with pytest.raises(sbx.ApiError) as e:
        sb.resume()
    assert "immutable" in str(e.value) and e.value.status == 422


def test_delete_is_idempotent_across_a_lost_answer():
    reset = urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset"))
    api = delete_api().on("DELETE", ONE, reset, (404, status(404, "NotFound", "gone")))
    assert client(api).get("s1").delete() is True
    d1, d2 = api.of("DELETE")
    assert d1.body == {"propagationPolicy": "Background", "preconditions": {"uid": "uid-s1"}} and d1.path == d2.path


@pytest.mark.parametrize("read,refused", [
    # gone: the delete is refused with 404
    ((404, status(404, "NotFound", "gone")), (404, status(404, "NotFound", "gone"))),
    # another Sandbox made under the name since: refused for the uid precondition
    ((200, sandbox_obj("s1", uid="uid-x")), (409, status(409, "Conflict", (
        'Operation cannot be fulfilled on Sandbox.sandbox.dev "s1": the UID in the precondition (uid-s1) does not '
        "match the UID in record (uid-x). The object might have been deleted and then recreated")))),
])
def test_a_delete_of_a_sandbox_gone_already_is_false_across_a_lost_answer(read, refused):
    # the refusal's answer lost and the delete sent again: refused again,
    # which is not the lost success of the test above; the other Sandbox stays
    reset = urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset"))
    api = base_api().on("GET", ONE, read).on("DELETE", ONE, reset, refused)
    assert client(api).get("s1").delete() is False


def test_delete_of_a_missing_sandbox_says_so():
    # gone before the delete's read (nothing is sent), or between the read and the delete
    api = base_api().on("GET", ONE, (404, status(404, "NotFound", "gone")))
    assert client(api).get("s1").delete() is False and not api.of("DELETE")
    api = delete_api().on("DELETE", ONE, (404, status(404, "NotFound", "gone")))
    assert client(api).get("s1").delete() is False


def test_the_context_manager_deletes_on_exit_even_after_an_error():
    api = delete_api().on("DELETE", ONE, (200, {"kind": "Status", "status": "Success"}))
    with pytest.raises(RuntimeError):
        with client(api).get("s1"):
            raise RuntimeError("the agent failed")
    assert len(api.of("DELETE")) == 1


def test_delete_is_guarded_by_the_uid_it_was_read_with():
    api = delete_api().on("DELETE", ONE, (200, {"kind": "Status", "status": "Success"}))
    assert client(api).get("s1").delete() is True
    (d,) = api.of("DELETE")
    assert d.body["preconditions"] == {"uid": "uid-s1"}


@pytest.mark.parametrize("words", [
    # before Kubernetes 1.35
    'Operation cannot be fulfilled on sandboxes.sandbox.dev "s1": '
    "Precondition failed: UID in precondition: uid-s1, UID in object meta: uid-x",
    # kube-apiserver v1.35.4, as e2e/test_agents.sh meets it
    'Operation cannot be fulfilled on Sandbox.sandbox.dev "s1": the UID in the precondition (uid-s1) does not '
    "match the UID in record (uid-x). The object might have been deleted and then recreated",
])
def test_the_context_manager_never_deletes_a_sandbox_re_created_under_its_name(words):
    # another Sandbox of the same name (another uid) stands there now, made
    # between the delete's read and the delete: the API server refuses the
    # guarded delete, and it is not this one's to delete
    refused = (409, status(409, "Conflict", words))
    api = delete_api().on("DELETE", ONE, refused)
    with client(api).get("s1") as sb:
        pass
    (d,) = api.of("DELETE")
    assert d.body["preconditions"] == {"uid": "uid-s1"}
    # made before the read: nothing is sent
    api.on("GET", ONE, (200, sandbox_obj("s1", uid="uid-x")))
    assert sb.delete() is False and len(api.of("DELETE")) == 1


def test_lifecycle_patches_are_guarded_by_the_uid():
    api = base_api().on("PATCH", ONE, patched(None), repeat_last=True)
    sb = client(api).get("s1")
    sb.suspend()
    sb.extend(60)
    for p in api.of("PATCH"):
        assert p.body["metadata"] == {"uid": "uid-s1"}


def test_get_missing_is_not_found_with_the_message():
    api = FakeApi().on("GET", ONE, (404, status(404, "NotFound", 'sandboxes.sandbox.dev "x" not found')))
    with pytest.raises(sbx.NotFound) as e:
        client(api).get("x")
    assert "not found" in str(e.value) and e.value.name == "x"


def test_list_filters_by_owner_and_key_across_pages():
    p1 = {"items": [sandbox_obj("b", spec={"workspaceOwner": "alice", "idempotencyKey": "k1"}),
                    sandbox_obj("a", spec={"workspaceOwner": "bob", "idempotencyKey": "k1"})],
          "metadata": {"continue": "tok"}}
    p2 = {"items": [sandbox_obj("c", spec={"workspaceOwner": "alice", "idempotencyKey": "k2"}),
                    sandbox_obj("d", spec={"idempotencyKey": "k1"})], "metadata": {}}
    api = FakeApi().on("GET", SANDBOXES, (200, p1), (200, p2), (200, p1), (200, p2), (200, p1), (200, p2))
    c = client(api)
    assert [s.name for s in c.list(owner="alice")] == ["b", "c"]
    assert [s.name for s in c.list(key="k1")] == ["a", "b", "d"]
    assert [s.name for s in c.list(owner="alice", key="k1")] == ["b"]
    assert api.requests[1].query["continue"] == ["tok"]
