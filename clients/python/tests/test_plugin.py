"""kubectl sandbox: flags where kubectl users put them, exit codes scripts
can use, --help on every command."""

from __future__ import annotations

import io
import json
import pathlib

import pytest

import sandbox_client as sbx
from sandbox_client import plugin
from fakeapi import ONE, PODS, SANDBOXES, FakeApi, client, cond, owned_pod, ready_status, sandbox_obj, status
from localpod import LocalPod


class Out(io.StringIO):
    """A text stream with a .buffer, like sys.stdout."""

    def __init__(self) -> None:
        super().__init__()
        self.buffer = io.BytesIO()

    def text(self) -> str:
        return self.getvalue() + self.buffer.getvalue().decode()


def run(api, argv, connector=None, stdin=""):
    out, err = Out(), Out()
    seen = {}

    def factory(args):
        seen["args"] = args
        return client(api, connector=connector, namespace=args.namespace or "team-a")

    inp = io.StringIO(stdin)
    inp.buffer = io.BytesIO(stdin.encode())  # type: ignore[attr-defined]
    code = plugin.run(argv, stdin=inp, stdout=out, stderr=err, client_factory=factory)
    return code, out.text(), err.text(), seen.get("args")


def created(req):
    o = req.body
    o["metadata"].update(uid="u", generation=1, resourceVersion="1")
    return 201, o


@pytest.mark.parametrize("verb", ["create", "get", "exec", "cp", "suspend", "resume", "wait", "extend", "delete"])
def test_every_command_has_help(verb, capsys):
    code = plugin.run([verb, "--help"])
    assert code == 0
    text = capsys.readouterr().out
    assert "exit codes:" in text and "--namespace" in text


def test_global_flags_before_or_after_the_command():
    api = FakeApi().on("GET", "/apis/sandbox.dev/v1alpha1/namespaces/ns1/sandboxes/x",
                       (200, sandbox_obj("x", ns="ns1")), (200, sandbox_obj("x", ns="ns1")))
    code, out, _, args = run(api, ["-n", "ns1", "get", "x", "-o", "json"])
    assert code == 0 and json.loads(out)["metadata"]["name"] == "x" and args.namespace == "ns1"
    code, out, _, args = run(api, ["get", "x", "-n", "ns1"])
    assert code == 0 and out.splitlines()[0].split() == ["NAME", "PHASE", "POD", "KEY", "OWNER", "READY", "AGE"]


def test_create_sends_the_flags_and_prints_like_kubectl():
    api = FakeApi().on("POST", SANDBOXES, created)
    code, out, err, _ = run(api, ["create", "fix-42", "--image", "img:1", "--owner", "alice", "--key", "task-42",
                                  "--ttl", "2h", "--env", "A=1", "--cpu", "1", "--", "sleep", "infinity"])
    assert code == 0, err
    assert out == "sandbox.sandbox.dev/fix-42 created\n"
    body = api.of("POST")[0].body
    assert body["metadata"]["name"] == "fix-42"
    s = body["spec"]
    assert s["workspaceOwner"] == "alice" and s["idempotencyKey"] == "task-42"
    assert s["command"] == ["sleep", "infinity"] and s["env"] == [{"name": "A", "value": "1"}]
    assert s["resources"]["limits"] == {"cpu": "1"} and "shutdownTime" in s["lifecycle"]


@pytest.mark.parametrize("answer,code", [
    ((403, status(403, "Forbidden", 'missing permission "use" on workspaces.sandbox.dev "alice"')),
     plugin.EXIT_FORBIDDEN),
    ((422, status(422, "Invalid", "spec.idempotencyKey: Invalid value: \"k\": the key is held by Sandbox a/b")),
     plugin.EXIT_CONFLICT),
    ((422, status(422, "Invalid", "spec.image: Required value")), plugin.EXIT_UNAVAILABLE),
    ((401, status(401, "Unauthorized", "Unauthorized")), plugin.EXIT_ERROR),
])
def test_create_refusals_map_to_exit_codes(answer, code):
    api = FakeApi().on("POST", SANDBOXES, answer)
    got, _, err, _ = run(api, ["create", "x", "--image", "img:1", "--owner", "alice"])
    assert got == code and err.startswith("error: ") and answer[1]["message"] in err


def test_quota_refusals_exit_with_the_quota_code():
    msg = "exceeded quota: workspace owner alice holds 3 of 3 active sandboxes (SandboxQuota team-a/alice, mode Reject)"
    api = FakeApi().on("POST", SANDBOXES, (403, status(403, "Forbidden", msg)))
    code, _, err, _ = run(api, ["create", "x", "--image", "img:1", "--owner", "alice"])
    assert code == plugin.EXIT_QUOTA and msg in err
    refused = {"phase": "Rejected", "observedGeneration": 1,
               "conditions": [cond("Bound", "False", "QuotaExceeded", "alice holds 3 of 3")]}
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("x", status=refused)), repeat_last=True)
    code, _, err, _ = run(api, ["wait", "x"])
    assert code == plugin.EXIT_QUOTA and "3 of 3" in err


def test_create_of_a_name_held_by_another_request_is_a_conflict():
    api = (FakeApi().on("POST", SANDBOXES, (409, status(409, "AlreadyExists", "exists")))
           .on("GET", ONE, (200, sandbox_obj("x", spec={"idempotencyKey": "theirs"}))))
    code, _, err, _ = run(api, ["create", "x", "--image", "img:1", "--key", "mine"])
    assert code == plugin.EXIT_CONFLICT and "another request" in err


def test_exec_exits_with_the_commands_code_and_passes_output(tmp_path):
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("x", status=ready_status())))
    api.on("GET", PODS, (200, owned_pod(owner="x")))
    code, out, err, _ = run(api, ["exec", "x", "--", "sh", "-c", "echo out; echo err >&2; exit 7"],
                            connector=LocalPod(str(tmp_path)))
    assert (code, out, err) == (7, "out\n", "err\n")


def test_exec_with_stdin(tmp_path):
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("x", status=ready_status())))
    api.on("GET", PODS, (200, owned_pod(owner="x")))
    code, out, _, _ = run(api, ["exec", "-i", "x", "--", "tr", "a-z", "A-Z"], connector=LocalPod(str(tmp_path)),
                          stdin="hello")
    assert (code, out) == (0, "HELLO")


def test_exec_usage_errors():
    assert run(FakeApi(), ["exec", "x"])[0] == plugin.EXIT_USAGE
    assert run(FakeApi(), ["get", "x", "--", "ls"])[0] == plugin.EXIT_USAGE
    assert run(FakeApi(), ["frobnicate"])[0] == plugin.EXIT_USAGE


def test_cp_in_and_out(tmp_path):
    pod_dir = tmp_path / "pod"
    pod_dir.mkdir()
    local = tmp_path / "local.bin"
    local.write_bytes(b"\x00\x01binary\xff")
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("x", status=ready_status())), repeat_last=True)
    api.on("GET", PODS, (200, owned_pod(owner="x")), repeat_last=True)
    pod = LocalPod(str(pod_dir))
    assert run(api, ["cp", str(local), "x:copy.bin"], connector=pod)[0] == 0
    assert (pod_dir / "copy.bin").read_bytes() == b"\x00\x01binary\xff"
    back = tmp_path / "back.bin"
    assert run(api, ["cp", "x:copy.bin", str(back)], connector=pod)[0] == 0
    assert back.read_bytes() == b"\x00\x01binary\xff"
    code, _, err, _ = run(api, ["cp", "x:missing", str(back)], connector=pod)
    assert code == plugin.EXIT_ERROR and "no such file" in err
    assert run(api, ["cp", str(local), str(back)], connector=pod)[0] == plugin.EXIT_USAGE
    assert run(api, ["cp", str(tmp_path / "nope"), "x:y"], connector=pod)[0] == plugin.EXIT_NOT_FOUND


def test_get_missing_exits_not_found():
    api = FakeApi().on("GET", ONE, (404, status(404, "NotFound", 'sandboxes.sandbox.dev "x" not found')))
    code, _, err, _ = run(api, ["get", "x"])
    assert code == plugin.EXIT_NOT_FOUND and "not found" in err


def test_get_lists_the_namespace():
    api = FakeApi().on("GET", SANDBOXES, (200, {"items": [
        sandbox_obj("a", spec={"workspaceOwner": "alice", "idempotencyKey": "k"}, status=ready_status())],
        "metadata": {}}))
    code, out, _, _ = run(api, ["get"])
    row = out.splitlines()[1].split()
    assert code == 0 and row[:6] == ["a", "Running", "sbx-0123", "k", "alice", "True"]


def test_suspend_resume_extend_delete():
    api = (FakeApi().on("GET", ONE, (200, sandbox_obj("x", status=ready_status())), repeat_last=True)
           .on("PATCH", ONE, lambda req: (200, sandbox_obj("x", spec={"lifecycle": req.body["spec"]["lifecycle"]})),
               repeat_last=True)
           .on("DELETE", ONE, (200, {"status": "Success"})))
    assert run(api, ["suspend", "x"])[:2] == (0, "sandbox.sandbox.dev/x suspended\n")
    assert run(api, ["resume", "x"])[:2] == (0, "sandbox.sandbox.dev/x resumed\n")
    code, out, _, _ = run(api, ["extend", "x", "--ttl", "1h"])
    assert code == 0 and out.startswith("sandbox.sandbox.dev/x extended to 20")
    assert [p.body for p in api.of("PATCH")][:2] == [
        {"spec": {"lifecycle": {"suspend": True}}, "metadata": {"uid": "uid-x"}},
        {"spec": {"lifecycle": {"suspend": False}}, "metadata": {"uid": "uid-x"}}]
    assert run(api, ["extend", "x", "--ttl", "soon"])[0] == plugin.EXIT_USAGE
    assert run(api, ["delete", "x"])[:2] == (0, "sandbox.sandbox.dev/x deleted\n")


def test_wait_for_ready_suspended_and_the_states_that_never_come():
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("x", status=ready_status())), repeat_last=True)
    assert run(api, ["wait", "x"])[:2] == (0, "sandbox.sandbox.dev/x condition met\n")
    suspended = {"phase": "Suspended", "observedGeneration": 1,
                 "conditions": [cond("Ready", "False", "Suspended")]}
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("x", status=suspended)), repeat_last=True)
    assert run(api, ["wait", "x", "--for", "suspended"])[:2] == (0, "sandbox.sandbox.dev/x condition met\n")
    assert run(api, ["wait", "x"])[0] == plugin.EXIT_UNAVAILABLE
    expired = {"phase": "Expired", "observedGeneration": 1,
               "conditions": [cond("Ready", "False", "Expired", "expired with team-a/first")]}
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("x", status=expired)), repeat_last=True)
    code, _, err, _ = run(api, ["wait", "x"])
    assert code == plugin.EXIT_UNAVAILABLE and "expired with team-a/first" in err
    api = FakeApi().on("GET", ONE, (404, status(404, "NotFound", "nf")), repeat_last=True)
    assert run(api, ["wait", "x"])[0] == plugin.EXIT_NOT_FOUND
    # the controller's refusal of an owner it cannot verify (phase Rejected): forbidden, as documented
    refused = {"phase": "Rejected", "observedGeneration": 1,
               "conditions": [cond("Bound", "False", "OwnerNotAuthorized", "no valid authorization record")]}
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("x", status=refused)), repeat_last=True)
    code, _, err, _ = run(api, ["wait", "x"])
    assert code == plugin.EXIT_FORBIDDEN and "authorization record" in err


def test_delete_ignore_not_found():
    api = FakeApi().on("GET", ONE, (404, status(404, "NotFound", "nf")), repeat_last=True)
    assert run(api, ["delete", "x"])[0] == plugin.EXIT_NOT_FOUND
    assert run(api, ["delete", "x", "--ignore-not-found"])[0] == 0


def test_delete_exits_0_only_when_it_deleted_the_sandbox():
    # --uid: only the Sandbox of that uid; the name holding another is "gone" (3), and nothing is sent
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("x")), repeat_last=True).on("DELETE", ONE, (200, {}))
    code, _, err, _ = run(api, ["delete", "x", "--uid", "uid-old"])
    assert code == plugin.EXIT_NOT_FOUND and "uid-old" in err and "uid-x" in err and not api.of("DELETE")
    assert run(api, ["delete", "x", "--uid", "uid-old", "--ignore-not-found"])[0] == 0 and not api.of("DELETE")
    assert run(api, ["delete", "x", "--uid", "uid-x"])[:2] == (0, "sandbox.sandbox.dev/x deleted\n")
    (d,) = api.of("DELETE")
    assert d.body["preconditions"] == {"uid": "uid-x"}
    # gone between the read and the delete (404, or 409: another uid under the name since): 3, not "deleted"
    gone = [(404, status(404, "NotFound", "gone")),
            (409, status(409, "Conflict", "the UID in the precondition (uid-x) does not match the UID in record "
                                          "(uid-y). The object might have been deleted and then recreated"))]
    for answer in gone:
        api = FakeApi().on("GET", ONE, (200, sandbox_obj("x")), repeat_last=True).on("DELETE", ONE, answer)
        code, out, err, _ = run(api, ["delete", "x"])
        assert (code, out) == (plugin.EXIT_NOT_FOUND, "") and "gone already" in err


def test_exit_code_table():
    assert plugin.exit_code_for(sbx.WaitTimeout("t")) == plugin.EXIT_TIMEOUT
    assert plugin.exit_code_for(sbx.Expired("e")) == plugin.EXIT_UNAVAILABLE
    assert plugin.exit_code_for(sbx.ForeignPodConflict("f")) == plugin.EXIT_CONFLICT
    assert plugin.exit_code_for(sbx.OwnerNotAuthorized("o")) == plugin.EXIT_FORBIDDEN
    assert plugin.exit_code_for(sbx.QuotaExceeded("q")) == plugin.EXIT_QUOTA
    assert plugin.exit_code_for(sbx.TransportError("x")) == plugin.EXIT_ERROR


def test_the_conformance_table_names_these_errors_and_exit_codes():
    """Every error kind of clients/conformance.yaml is an exported error of
    this package, and the plugin exits with the table's code for it."""
    yaml = pytest.importorskip("yaml")
    table = pathlib.Path(__file__).resolve().parents[2] / "conformance.yaml"
    if not table.is_file():
        pytest.skip("not inside the repository")
    for kind, names in yaml.safe_load(table.read_text())["errors"].items():
        cls = getattr(sbx, names["python"], None)
        assert isinstance(cls, type) and issubclass(cls, sbx.SandboxError), kind
        assert plugin.exit_code_for(cls("x")) == names["plugin"], kind
        assert f"  {names['plugin']}  " in plugin.EXIT_CODES, kind
