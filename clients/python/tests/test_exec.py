"""run, write_file, read_file, list_dir: exit codes from the stream's status,
bytes kept bytes, size caps, and the shell programs run for real (locally)."""

from __future__ import annotations

import json
import os
import stat

import pytest

import sandbox_client as sbx
from sandbox_client import _exec
from fakeapi import ONE, PODS, FakeApi, client, owned_pod, ready_status, sandbox_obj, status
from localpod import LocalPod, ScriptedFrames, nonzero, success


def sandbox(connector, status_=None):
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("s1", status=status_ or ready_status())), repeat_last=True)
    api.on("GET", PODS, (200, owned_pod()), repeat_last=True)
    return client(api, connector=connector).get("s1")


# ------------------------------------------------------------ statuses

def test_exit_codes_from_the_status():
    assert _exec.exit_code_of(success()[1]) == 0
    assert _exec.exit_code_of(nonzero(7)[1]) == 7
    # kwok's local exec loses the cause and reports Go's "exit status N"
    kwok = {"status": "Failure", "reason": "InternalError", "code": 500,
            "message": "Internal error occurred: error executing command in container: cmd wait: sh -c "
                       "exit 3: exit status 3"}
    assert _exec.exit_code_of(json.dumps(kwok).encode()) == 3


def test_exit_code_from_a_real_kubelet():
    # A real kubelet's status as it comes over the wire: metav1.StatusCause's
    # Type is serialized as "reason", and the message ends in "exit code N"
    # (seen on the real node of e2e/test_realnode.sh).
    kubelet = {"metadata": {}, "status": "Failure",
               "message": "command terminated with non-zero exit code: error executing command "
                          "[sh -c echo out; echo oops >&2; exit 3], exit code 3",
               "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}
    assert _exec.exit_code_of(json.dumps(kubelet).encode()) == 3
    del kubelet["details"]
    assert _exec.exit_code_of(json.dumps(kubelet).encode()) == 3


@pytest.mark.parametrize("st", [
    {"status": "Failure", "reason": "InternalError", "message": "error executing command in container: cmd "
                                                              "start: /x: fork/exec /x: no such file or directory"},
    {"status": "Failure", "reason": "InternalError", "message": "container not found (\"sandbox\")"},
    {"status": "Failure", "reason": "InternalError", "message": "signal: killed"},
    {"status": "Failure", "reason": "Forbidden", "message": "command failed: exit status 1"},
])
def test_a_status_without_an_exit_code_is_an_exec_error(st):
    with pytest.raises(sbx.ExecError) as e:
        _exec.exit_code_of(json.dumps(st).encode())
    assert st["message"] in str(e.value)


def test_a_stream_that_ends_without_status_is_an_exec_error():
    with pytest.raises(sbx.ExecError):
        _exec.execute(lambda *a: ScriptedFrames([(1, b"x")]), "ns", "p", "c", ["true"], 5, 100)


def test_output_stays_bytes_across_frames():
    data = "héllo wörld ✓\n".encode() + b"\xff\xfe binary"
    frames = [(1, data[i:i + 3]) for i in range(0, len(data), 3)] + [(2, b"warn\n"), nonzero(2)]
    r = _exec.execute(lambda *a: ScriptedFrames(frames), "ns", "p", "c", ["x"], 5, 1000)
    assert r.stdout_bytes == data and r.stderr == "warn\n" and r.exit_code == 2 and not r.ok
    code, out, err = r
    assert code == 2 and out.startswith("héllo wörld ✓") and err == "warn\n"


def test_output_over_the_cap_is_refused_and_the_stream_closed():
    f = ScriptedFrames([(1, b"x" * 600), (1, b"x" * 600), success()])
    with pytest.raises(sbx.LimitExceeded):
        _exec.execute(lambda *a: f, "ns", "p", "c", ["yes"], 5, 1000)
    assert f.closed


def test_no_exit_in_time_is_exec_timeout():
    f = ScriptedFrames([(1, b"a"), TimeoutError()])
    with pytest.raises(sbx.ExecTimeout) as e:
        _exec.execute(lambda *a: f, "ns", "p", "c", ["sleep", "9"], 2, 1000)
    assert f.closed and isinstance(e.value, TimeoutError)


def test_a_refused_handshake_carries_the_servers_message(monkeypatch):
    msg = ('admission webhook "validate-pod-connect.sandbox.dev" denied the request: bob may not use workspace '
           'owner "alice": missing permission "use" on workspaces.sandbox.dev "alice"')
    api = FakeApi().on("POST", "/api/v1/namespaces/team-a/pods/sbx-1/exec", (403, status(403, "Forbidden", msg)))
    c = client(api)
    from kubernetes.client.exceptions import ApiException
    import kubernetes.stream

    def refused(*a, **k):
        raise ApiException(status=0, reason="Handshake status 403 Forbidden")

    monkeypatch.setattr(kubernetes.stream, "stream", refused)
    conn = _exec.websocket_connector(c.api_client)
    with pytest.raises(sbx.OwnerNotAuthorized) as e:
        conn("team-a", "sbx-1", "sandbox", ["id"], 5)
    assert msg in str(e.value) and e.value.status == 403
    (post,) = api.of("POST")
    assert post.query["command"] == ["id"]  # the same request, only not upgraded


def test_a_failed_connection_is_an_exec_error(monkeypatch):
    from kubernetes.client.exceptions import ApiException
    import kubernetes.stream

    def down(*a, **k):
        raise ApiException(status=0, reason="[Errno 111] Connection refused")

    monkeypatch.setattr(kubernetes.stream, "stream", down)
    conn = _exec.websocket_connector(client(FakeApi()).api_client)
    with pytest.raises(sbx.ExecError) as e:
        conn("team-a", "sbx-1", "sandbox", ["id"], 5)
    assert "Connection refused" in str(e.value)


# ------------------------------------------------------ run, for real

def test_run_sends_plain_argv_when_nothing_else_is_asked(tmp_path):
    pod = LocalPod(str(tmp_path))
    r = sandbox(pod).run(["sh", "-c", "echo out; echo err >&2; exit 4"])
    assert (r.exit_code, r.stdout, r.stderr) == (4, "out\n", "err\n")
    assert pod.calls == [["sh", "-c", "echo out; echo err >&2; exit 4"]]


@pytest.mark.parametrize("pod", [owned_pod(uid="pod-uid-2"), owned_pod(owner_uid="uid-other"),
                                 owned_pod(deletionTimestamp="2026-05-01T10:00:00Z")])
def test_run_refuses_a_pod_that_is_not_the_sandboxs(tmp_path, pod):
    # status.podName names a pod that is not this Sandbox's bound pod (another
    # uid, not owned by it, going): no command is run in it
    local = LocalPod(str(tmp_path))
    st = dict(ready_status(), podUID="pod-uid-1")
    api = FakeApi().on("GET", ONE, (200, sandbox_obj("s1", status=st)), repeat_last=True)
    api.on("GET", PODS, (200, pod), repeat_last=True)
    sb = client(api, connector=local).get("s1")
    with pytest.raises(sbx.NotReady):
        sb.run(["true"])
    assert local.calls == []


def test_run_with_stdin_env_and_cwd(tmp_path):
    (tmp_path / "sub dir").mkdir()
    pod = LocalPod(str(tmp_path))
    sb = sandbox(pod)
    r = sb.run(["sh", "-c", 'printf "%s|%s|" "$A" "$B"; pwd; cat'], stdin=b"in\x00put\n",
               env={"A": "x y", "B": "$(rm -rf /)"}, cwd="sub dir")
    assert r.exit_code == 0
    assert r.stdout_bytes == f"x y|$(rm -rf /)|{tmp_path}/sub dir\n".encode() + b"in\x00put\n"


def test_run_exit_code_passes_through_the_wrapper(tmp_path):
    sb = sandbox(LocalPod(str(tmp_path)))
    assert sb.run(["sh", "-c", "cat >/dev/null; exit 9"], stdin="x").exit_code == 9
    assert sb.run(["sh", "-c", "exit 5"], cwd=".").exit_code == 5
    assert sb.run(["true"], cwd="/nonexistent-dir").exit_code == 126


def test_run_with_large_stdin_stages_it_and_cleans_up(tmp_path):
    pod = LocalPod(str(tmp_path))
    data = os.urandom(300_000)
    r = sandbox(pod).run(["sha256sum"], stdin=data)
    import hashlib
    assert r.stdout.split()[0] == hashlib.sha256(data).hexdigest()
    assert all(len(a) <= _exec.CHUNK + 1 for call in pod.calls for a in call)
    staged = [a for a in pod.calls[-1] if a.startswith("@")]
    assert staged and not os.path.exists(staged[0][1:])


def test_run_refuses_bad_arguments(tmp_path):
    sb = sandbox(LocalPod(str(tmp_path)))
    with pytest.raises(TypeError):
        sb.run("echo hi")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        sb.run(["true"], env={"A=B": "x"})


def test_run_needs_a_pod(tmp_path):
    sb = sandbox(LocalPod(str(tmp_path)), {"phase": "Suspended", "observedGeneration": 1})
    with pytest.raises(sbx.NotReady):
        sb.run(["true"])


# ---------------------------------------------------- files, for real

@pytest.mark.parametrize("size", [0, 1, 5, 73727, 73728, 73729, 400_000])
def test_write_then_read_is_byte_exact(tmp_path, size):
    pod = LocalPod(str(tmp_path))
    sb = sandbox(pod)
    data = os.urandom(size)
    sb.write_file("out/blob.bin", data, make_dirs=True)
    assert (tmp_path / "out" / "blob.bin").read_bytes() == data
    assert sb.read_file("out/blob.bin") == data
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["blob.bin"]  # no temporary left
    assert all(len(a) <= _exec.CHUNK for call in pod.calls for a in call)


def test_write_replaces_atomically_and_sets_the_mode(tmp_path):
    sb = sandbox(LocalPod(str(tmp_path)))
    (tmp_path / "run.sh").write_text("old")
    sb.write_file("run.sh", "#!/bin/sh\necho new\n", mode=0o755)
    assert (tmp_path / "run.sh").read_text() == "#!/bin/sh\necho new\n"
    assert stat.S_IMODE((tmp_path / "run.sh").stat().st_mode) == 0o755
    sb.write_file("-dash", b"x", mode="600")
    assert (tmp_path / "-dash").read_bytes() == b"x"


def test_write_into_a_missing_folder_fails_with_the_shells_message(tmp_path):
    sb = sandbox(LocalPod(str(tmp_path)))
    with pytest.raises(sbx.FileError) as e:
        sb.write_file("nope/x", b"data")
    assert "nope" in str(e.value) and e.value.exit_code != 0


def test_write_over_the_cap_sends_nothing(tmp_path):
    pod = LocalPod(str(tmp_path))
    with pytest.raises(sbx.LimitExceeded):
        sandbox(pod).write_file("x", b"12345", max_size=4)
    assert pod.calls == []


def test_read_errors(tmp_path):
    sb = sandbox(LocalPod(str(tmp_path)))
    (tmp_path / "d").mkdir()
    (tmp_path / "big").write_bytes(b"x" * 100)
    with pytest.raises(sbx.FileError) as e:
        sb.read_file("missing")
    assert "no such file" in str(e.value)
    with pytest.raises(sbx.FileError) as e:
        sb.read_file("d")
    assert "not a regular file" in str(e.value)
    with pytest.raises(sbx.LimitExceeded):
        sb.read_file("big", max_size=99)
    assert sb.read_file("big", max_size=100) == b"x" * 100
    assert sb.read_text("big", max_size=100) == "x" * 100


def test_list_dir_names_types_and_sizes(tmp_path):
    sb = sandbox(LocalPod(str(tmp_path)))
    (tmp_path / "a file.txt").write_bytes(b"12345")
    (tmp_path / "-x").write_bytes(b"")
    (tmp_path / "new\nline").write_bytes(b"1")
    (tmp_path / "ünï").write_bytes(b"12")
    (tmp_path / ".hidden").write_bytes(b"123")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to("a file.txt")
    got = {(e.name, e.type, e.size) for e in sb.list_dir(".")}
    assert got == {("a file.txt", "file", 5), ("-x", "file", 0), ("new\nline", "file", 1), ("ünï", "file", 2),
                   (".hidden", "file", 3), ("sub", "dir", 0), ("link", "symlink", 0)}
    assert sb.list_dir("sub") == []


def test_list_dir_caps_and_errors(tmp_path):
    sb = sandbox(LocalPod(str(tmp_path)))
    for i in range(5):
        (tmp_path / f"f{i}").write_bytes(b"")
    with pytest.raises(sbx.LimitExceeded):
        sb.list_dir(".", max_entries=4)
    assert len(sb.list_dir(".", max_entries=5)) == 5
    with pytest.raises(sbx.FileError):
        sb.list_dir("missing")
