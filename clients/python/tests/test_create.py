"""create(): one object per call across retries, AlreadyExists verified
field by field, typed refusals, the retry policy."""

from __future__ import annotations

import copy
import ssl

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

import sandbox_client as sbx
from fakeapi import ONE, SANDBOXES, BrokenBody, Clock, FakeApi, client, sandbox_obj, status

DEFAULTS = {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}


def stored(body):
    """What the API server stores for a POSTed body: defaults applied."""
    o = copy.deepcopy(body)
    o["spec"].setdefault("resources", copy.deepcopy(DEFAULTS))
    o["metadata"].update(uid="u1", generation=1, resourceVersion="5")
    return o


def created(req):
    return 201, stored(req.body)


RESET = urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset"))


def test_first_try_sends_one_fixed_name_and_a_fresh_key_with_strict_validation():
    api = FakeApi().on("POST", SANDBOXES, created)
    sb = client(api).create("img:1", ["sleep", "infinity"], owner="alice", wait=False)
    (post,) = api.of("POST")
    assert post.query["fieldValidation"] == ["Strict"]
    md, spec = post.body["metadata"], post.body["spec"]
    assert "generateName" not in md and md["name"].startswith("sandbox-")
    assert spec["idempotencyKey"].startswith("sbxc-") and spec["workspaceOwner"] == "alice"
    assert spec["command"] == ["sleep", "infinity"] and "resources" not in spec
    assert sb.name == md["name"] and sb.key == spec["idempotencyKey"]


def test_each_call_gets_its_own_key_and_name():
    api = FakeApi().on("POST", SANDBOXES, created, created)
    c = client(api)
    a, b = c.create("img:1", wait=False), c.create("img:1", wait=False)
    assert a.key != b.key and a.name != b.name


def test_a_lost_response_is_retried_into_the_same_object_and_verified():
    # The first POST reached the server (it created the object) but the
    # connection broke before the answer: the retry gets AlreadyExists and
    # reads the object back.
    holder = {}

    def first(req):
        holder["obj"] = stored(req.body)
        return RESET

    api = (FakeApi()
           .on("POST", SANDBOXES, first, (409, status(409, "AlreadyExists", "sandboxes.sandbox.dev exists")))
           .on("GET", ONE, lambda req: (200, holder["obj"])))
    clock = Clock()
    sb = client(api, clock).create("img:1", ["sleep", "1"], owner="alice", key="task-42", wait=False)
    posts = api.of("POST")
    assert len(posts) == 2
    assert posts[0].body == posts[1].body  # same name, same key, same spec
    assert api.of("GET")[0].path == f"{SANDBOXES}/{posts[0].body['metadata']['name']}"
    assert sb.uid == "u1" and sb.key == "task-42"
    assert len(clock.sleeps) == 1


def test_a_lost_response_without_a_key_keeps_the_generated_key():
    holder = {}

    def first(req):
        holder["obj"] = stored(req.body)
        return urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out")

    api = (FakeApi().on("POST", SANDBOXES, first, (409, status(409, "AlreadyExists", "exists")))
           .on("GET", ONE, lambda req: (200, holder["obj"])))
    sb = client(api).create("img:1", wait=False)
    a, b = api.of("POST")
    assert a.body["spec"]["idempotencyKey"] == b.body["spec"]["idempotencyKey"] == sb.key


@pytest.mark.parametrize("answer", [
    (503, status(503, "ServiceUnavailable", "etcd is down")),
    (500, status(500, "InternalError", "failed calling webhook")),
    (504, status(504, "Timeout", "the server was unable to return a response in the time allotted")),
    RESET,
    urllib3.exceptions.NewConnectionError(None, "connection refused"),
    ApiException(status=0, reason="SSLError\nEOF occurred in violation of protocol"),
])
def test_transient_failures_are_retried(answer):
    api = FakeApi().on("POST", SANDBOXES, answer, created)
    sb = client(api).create("img:1", wait=False)
    assert len(api.of("POST")) == 2 and sb.uid == "u1"


def test_429_waits_at_least_retry_after():
    api = FakeApi().on("POST", SANDBOXES, (429, status(429, "TooManyRequests", "slow down"), {"Retry-After": "7"}),
                       created)
    clock = Clock()
    client(api, clock).create("img:1", wait=False)
    assert clock.sleeps and clock.sleeps[0] >= 7


def test_backoff_doubles_and_retries_end_with_the_deadline():
    api = FakeApi().on("POST", SANDBOXES, (503, status(503, "ServiceUnavailable", "down")), repeat_last=True)
    clock = Clock()
    with pytest.raises(sbx.ApiError) as e:
        client(api, clock).create("img:1", wait=False, timeout=10)
    assert e.value.status == 503 and "down" in str(e.value)
    assert clock.sleeps[:4] == [0.1, 0.2, 0.4, 0.8] and max(clock.sleeps) <= 5.0
    assert sum(clock.sleeps) <= 10
    names = {r.body["metadata"]["name"] for r in api.of("POST")}
    assert len(names) == 1


def test_a_server_that_stays_unreachable_is_a_transport_error():
    api = FakeApi().on("POST", SANDBOXES, urllib3.exceptions.NewConnectionError(None, "refused"), repeat_last=True)
    with pytest.raises(sbx.TransportError):
        client(api).create("img:1", wait=False, timeout=3)


@pytest.mark.parametrize("answer", [
    (401, status(401, "Unauthorized", "Unauthorized")),
    (404, status(404, "NotFound", "the server could not find the requested resource")),
    ApiException(status=0, reason="SSLError\n[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"),
])
def test_final_answers_are_not_retried(answer):
    api = FakeApi().on("POST", SANDBOXES, answer)
    with pytest.raises(sbx.SandboxError):
        client(api).create("img:1", wait=False)
    assert len(api.of("POST")) == 1


def test_owner_refusal_is_owner_not_authorized_with_the_servers_message():
    msg = ('admission webhook "mutate.sandboxes.sandbox.dev" denied the request: bob may not use workspace '
           'owner "alice" in namespace team-a: missing permission "use" on workspaces.sandbox.dev "alice"')
    api = FakeApi().on("POST", SANDBOXES, (403, status(403, "Forbidden", msg)))
    with pytest.raises(sbx.OwnerNotAuthorized) as e:
        client(api).create("img:1", owner="alice", wait=False)
    assert e.value.message == msg and e.value.status == 403
    assert isinstance(e.value, sbx.Forbidden)


def test_rbac_refusal_is_forbidden():
    api = FakeApi().on("POST", SANDBOXES, (403, status(403, "Forbidden", 'User "x" cannot create resource')))
    with pytest.raises(sbx.Forbidden) as e:
        client(api).create("img:1", wait=False)
    assert not isinstance(e.value, sbx.OwnerNotAuthorized)


def test_a_quota_refusal_is_quota_exceeded():
    msg = ('admission webhook "validate.sandboxes.sandbox.dev" denied the request: exceeded quota: workspace '
           'owner alice holds 3 of 3 active sandboxes in namespace team-a (SandboxQuota team-a/alice, mode Reject)')
    api = FakeApi().on("POST", SANDBOXES, (403, status(403, "Forbidden", msg)))
    with pytest.raises(sbx.QuotaExceeded) as e:
        client(api).create("img:1", owner="alice", wait=False)
    assert e.value.message == msg and e.value.status == 403 and isinstance(e.value, sbx.Forbidden)
    assert len(api.of("POST")) == 1


def test_key_held_by_another_spec_is_idempotency_key_conflict():
    msg = ('admission webhook "validate.sandboxes.sandbox.dev" denied the request: spec.idempotencyKey: '
           'Invalid value: "task-43": the key is held by Sandbox team-a/conflict-a of workspace owner alice '
           'with a different spec')
    api = FakeApi().on("POST", SANDBOXES, (422, status(422, "Invalid", msg)))
    with pytest.raises(sbx.IdempotencyKeyConflict) as e:
        client(api).create("other:2", owner="alice", key="task-43", wait=False)
    assert "conflict-a" in str(e.value)


@pytest.mark.parametrize("code,msg", [
    (422, 'Sandbox.sandbox.dev "x" is invalid: spec.workspaceOwner: Invalid value: "A": should match'),
    (400, 'Sandbox in version "v1alpha1" cannot be handled: strict decoding error: unknown field "spec.lifecycle"'),
])
def test_invalid_requests_are_rejected(code, msg):
    api = FakeApi().on("POST", SANDBOXES, (code, status(code, "Invalid" if code == 422 else "BadRequest", msg)))
    with pytest.raises(sbx.Rejected) as e:
        client(api).create("img:1", wait=False)
    assert e.value.message == msg


def _exists_then(stored_obj):
    return (FakeApi().on("POST", SANDBOXES, (409, status(409, "AlreadyExists", "exists")))
            .on("GET", ONE, (200, stored_obj)))


def test_an_existing_object_of_another_key_is_never_returned():
    api = _exists_then(sandbox_obj("mine", spec={"idempotencyKey": "other", "workspaceOwner": "alice"}))
    with pytest.raises(sbx.IntentMismatch) as e:
        client(api).create("img:1", owner="alice", key="task-1", name="mine", wait=False)
    assert "idempotency key" in str(e.value)


def test_an_existing_object_of_another_owner_is_never_returned():
    api = _exists_then(sandbox_obj("mine", spec={"idempotencyKey": "task-1", "workspaceOwner": "bob"}))
    with pytest.raises(sbx.IntentMismatch) as e:
        client(api).create("img:1", owner="alice", key="task-1", name="mine", wait=False)
    assert "workspace owner" in str(e.value)


def test_an_existing_object_without_owner_is_not_alices():
    api = _exists_then(sandbox_obj("mine", spec={"idempotencyKey": "task-1"}))
    with pytest.raises(sbx.IntentMismatch):
        client(api).create("img:1", owner="alice", key="task-1", name="mine", wait=False)


@pytest.mark.parametrize("spec", [
    {"image": "img:2"},
    {"command": ["sh"]},
    {"args": ["x"]},
    {"env": [{"name": "A", "value": "1"}]},
    {"runtimeClassName": "gvisor"},
    {"resources": {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"cpu": "1", "memory": "4Gi"}}},
])
def test_same_key_and_owner_with_another_spec_is_a_conflict(spec):
    s = {"idempotencyKey": "task-1", "workspaceOwner": "alice"}
    s.update(spec)
    api = _exists_then(sandbox_obj("mine", spec=s))
    with pytest.raises(sbx.IdempotencyKeyConflict) as e:
        client(api).create("img:1", owner="alice", key="task-1", name="mine", wait=False)
    assert "differs" in str(e.value)


def test_stored_defaults_and_lifecycle_do_not_make_a_conflict():
    spec = {"idempotencyKey": "task-1", "workspaceOwner": "alice", "command": ["sleep", "1"],
            "lifecycle": {"shutdownTime": "2030-01-01T00:00:00Z", "suspend": True}}
    api = _exists_then(sandbox_obj("mine", spec=spec))
    sb = client(api).create("img:1", ["sleep", "1"], owner="alice", key="task-1", name="mine", wait=False,
                            shutdown_after="1h")
    assert sb.uid == "uid-mine"


def test_resources_shorthand_and_integer_quantities_match_their_stored_form():
    spec = {"idempotencyKey": "k", "resources": {"requests": {"cpu": 1, "memory": "1Gi"},
                                                  "limits": {"cpu": "1", "memory": "1Gi"}}}
    api = _exists_then(sandbox_obj("mine", spec=spec))
    sb = client(api).create("img:1", key="k", name="mine", resources={"cpu": 1, "memory": "1Gi"}, wait=False)
    assert sb.name == "mine"


def test_explicit_default_resources_match_a_stored_default():
    api = _exists_then(sandbox_obj("mine", spec={"idempotencyKey": "k"}))
    client(api).create("img:1", key="k", name="mine", resources={"cpu": "2", "memory": "4Gi"}, wait=False)


def test_an_existing_object_being_deleted_is_not_returned():
    api = _exists_then(sandbox_obj("mine", spec={"idempotencyKey": "k"}, deletionTimestamp="2026-05-01T10:00:00Z"))
    with pytest.raises(sbx.SandboxFailed) as e:
        client(api).create("img:1", key="k", name="mine", wait=False)
    assert "being deleted" in str(e.value) and e.value.reason == "Deleting"


def test_the_read_after_already_exists_is_retried_too():
    api = (FakeApi().on("POST", SANDBOXES, (409, status(409, "AlreadyExists", "exists")))
           .on("GET", ONE, (500, status(500, "InternalError", "x")), (200, BrokenBody(b'{"kind":')),
               (200, sandbox_obj("mine", spec={"idempotencyKey": "k"}))))
    sb = client(api).create("img:1", key="k", name="mine", wait=False)
    assert sb.name == "mine" and len(api.of("GET")) == 3


def test_arguments_are_checked_before_anything_is_sent():
    api = FakeApi()
    c = client(api)
    with pytest.raises(ValueError):
        c.create("img:1", owner="", wait=False)
    with pytest.raises(ValueError):
        c.create("", wait=False)
    with pytest.raises(TypeError):
        c.create("img:1", "sleep infinity", wait=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        c.create("img:1", shutdown_policy="Never", wait=False)
    assert api.requests == []


def test_shutdown_after_sets_lifecycle_shutdown_time():
    api = FakeApi().on("POST", SANDBOXES, created)
    client(api).create("img:1", shutdown_after="2h", shutdown_policy="Delete", wait=False)
    lc = api.of("POST")[0].body["spec"]["lifecycle"]
    assert lc["shutdownPolicy"] == "Delete"
    t = sbx._duration.parse_rfc3339(lc["shutdownTime"])
    import datetime as dt
    left = (t - dt.datetime.now(dt.timezone.utc)).total_seconds()
    assert 7100 < left <= 7201


def test_certificate_errors_are_not_transient():
    assert sbx._rest.retry_after(ssl.SSLCertVerificationError()) is None
    e = ApiException(status=0, reason="SSLError\n[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    assert sbx._rest.retry_after(e) is None
