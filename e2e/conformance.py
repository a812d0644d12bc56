#!/usr/bin/env python3
"""The conformance table (clients/conformance.yaml) run by the Python client
and by `kubectl sandbox`, and the harness steps every driver shares.

    conformance.py run python|plugin TABLE NAMESPACE
    conformance.py harness TABLE NAMESPACE precreate|check|quota STEP_JSON   (for the Go driver)

Identities come from the environment: CONFORMANCE_KUBECONFIG_<as> (with "-"
as "_") is the kubeconfig of identity <as>; KUBECONFIG is the admin's (the
harness reads with it). Prints "PASS case" / "FAIL case: why" per case and
"N passed, N failed"; exits 1 when a case failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import yaml


def kubeconfig(identity: str) -> str:
    return os.environ["CONFORMANCE_KUBECONFIG_" + identity.replace("-", "_")]


def spec_of(req: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    """The spec a client sends for a create step (absent fields left out)."""
    spec: Dict[str, Any] = {"image": req.get("image", defaults["image"]),
                            "command": list(req.get("command", defaults["command"]))}
    if req.get("runtimeClassName"):
        spec["runtimeClassName"] = req["runtimeClassName"]
    spec["idempotencyKey"] = req["key"]
    if req.get("owner"):
        spec["workspaceOwner"] = req["owner"]
    return spec


# ------------------------------------------------------------------ harness


def kubectl(args: List[str], kc: Optional[str] = None, stdin: Optional[str] = None) -> Tuple[int, str, str]:
    env = dict(os.environ)
    if kc:
        env["KUBECONFIG"] = kc
    p = subprocess.run(["kubectl"] + args, input=stdin, capture_output=True, text=True, env=env, timeout=60)
    return p.returncode, p.stdout, p.stderr


def precreate(ns: str, step: Dict[str, Any], defaults: Dict[str, Any]) -> str:
    """Stores the request's object as the identity would; returns its uid."""
    body = {"apiVersion": "sandbox.dev/v1alpha1", "kind": "Sandbox",
            "metadata": {"name": step["name"], "namespace": ns}, "spec": spec_of(step, defaults)}
    code, out, err = kubectl(["create", "-o", "jsonpath={.metadata.uid}", "-f", "-"], kubeconfig(step["as"]),
                             json.dumps(body))
    if code != 0:
        raise AssertionError(f"precreate {step['name']}: {err.strip()}")
    return out.strip()


def sandboxes(ns: str) -> List[Dict[str, Any]]:
    code, out, err = kubectl(["get", "sandboxes", "-n", ns, "-o", "json"])
    if code != 0:
        raise AssertionError(f"list Sandboxes: {err.strip()}")
    return json.loads(out)["items"]


def pods(ns: str) -> Dict[str, Dict[str, Any]]:
    code, out, err = kubectl(["get", "pods", "-n", ns, "-o", "json"])
    if code != 0:
        raise AssertionError(f"list pods: {err.strip()}")
    return {p["metadata"]["name"]: p for p in json.loads(out)["items"] if not p["metadata"].get("deletionTimestamp")}


def check_once(ns: str, c: Dict[str, Any]) -> Optional[str]:
    """None when the check holds now, else what does not."""
    items = sandboxes(ns)
    live = pods(ns)
    by_name = {s["metadata"]["name"]: s for s in items}
    if "name" in c:
        sb = by_name.get(c["name"])
        if c.get("exists") is False:
            return None if sb is None else f"Sandbox {c['name']} exists"
        if sb is None:
            return f"no Sandbox {c['name']}"
        st = sb.get("status") or {}
        for field in ("phase", "binding"):
            if field in c and st.get(field) != c[field]:
                return f"Sandbox {c['name']}: {field} {st.get(field)!r}, want {c[field]!r}"
        if c.get("podGone") and st.get("podName") in live:
            return f"Sandbox {c['name']}: pod {st.get('podName')} still there"
        for field, same in (("samePodAs", True), ("otherPodThan", False)):
            if field in c:
                other = (by_name.get(c[field]) or {}).get("status", {}).get("podName")
                if not st.get("podName") or (st.get("podName") == other) != same:
                    return f"Sandbox {c['name']}: pod {st.get('podName')}, {c[field]}'s {other}"
    if "key" in c or "keyPrefix" in c:
        if "key" in c:
            mine = [s for s in items if s["spec"].get("idempotencyKey") == c["key"]]
        else:
            mine = [s for s in items if s["spec"].get("idempotencyKey", "").startswith(c["keyPrefix"])]
        what = c.get("key") or c["keyPrefix"] + "*"
        if "sandboxes" in c and len(mine) != c["sandboxes"]:
            return f"key {what}: {len(mine)} Sandboxes, want {c['sandboxes']}"
        names = {(s.get("status") or {}).get("podName") for s in mine} - {None, ""}
        have = sorted(n for n in names if n in live)
        if "pods" in c and len(have) != c["pods"]:
            return f"key {what}: pods {have}, want {c['pods']}"
    return None


def check(ns: str, c: Dict[str, Any]) -> None:
    end = time.monotonic() + float(c.get("within", 0))
    while True:
        why = check_once(ns, c)
        if why is None:
            return
        if time.monotonic() >= end:
            raise AssertionError(why)
        time.sleep(0.5)


def quota(ns: str, step: Dict[str, Any]) -> None:
    """Applies the SandboxQuota quota-OWNER of the owner, as the operator would."""
    spec = {"owner": step["owner"], "maxActive": step["maxActive"], "mode": step.get("mode", "Queue")}
    body = {"apiVersion": "sandbox.dev/v1alpha1", "kind": "SandboxQuota",
            "metadata": {"name": f"quota-{step['owner']}", "namespace": ns}, "spec": spec}
    code, _, err = kubectl(["apply", "-f", "-"], None, json.dumps(body))
    if code != 0:
        raise AssertionError(f"quota of {step['owner']}: {err.strip()}")


HARNESS_STEPS = ("precreate", "check", "quota")


def harness(ns: str, kind: str, step: Dict[str, Any], defaults: Dict[str, Any]) -> str:
    """Runs a harness step; returns the precreated uid ("" for the others)."""
    if kind == "precreate":
        return precreate(ns, step, defaults)
    if kind == "quota":
        quota(ns, step)
        return ""
    check(ns, step)
    return ""


# ------------------------------------------------------------------ drivers


class Outcome:
    """A client step's end: ok or an error (the client's name for it, the
    plugin's exit code), the Sandbox it returned (obj; handle, the Python
    client's own), and for a delete whether it deleted the Sandbox."""

    def __init__(self, ok: bool, error: Any = None, obj: Optional[Dict[str, Any]] = None, message: str = "",
                 handle: Any = None, deleted: Optional[bool] = None):
        self.ok, self.error, self.obj, self.message = ok, error, obj, message
        self.handle, self.deleted = handle, deleted


# What a create kept under its label for a delete: the identity it ran as and its outcome.
Kept = Tuple[str, Outcome]


class PythonDriver:
    """The Python client (sandbox_client), one Client per identity."""

    name = "python"

    def __init__(self, ns: str) -> None:
        import sandbox_client as sbx
        self.sbx = sbx
        self.ns = ns
        self.clients: Dict[str, Any] = {}

    def client(self, identity: str) -> Any:
        if identity not in self.clients:
            self.clients[identity] = self.sbx.Client(self.ns, kubeconfig=kubeconfig(identity))
        return self.clients[identity]

    def _do(self, fn: Any) -> Outcome:
        try:
            sb = fn()
            return Outcome(True, obj=sb.raw if sb is not None else None, handle=sb)
        except self.sbx.SandboxError as e:
            return Outcome(False, error=type(e).__name__, message=e.message)

    def create(self, r: Dict[str, Any], defaults: Dict[str, Any]) -> Outcome:
        spec = spec_of(r, defaults)
        return self._do(lambda: self.client(r["as"]).create(
            spec["image"], spec["command"], owner=r.get("owner"), key=r["key"], name=r["name"],
            runtime_class=r.get("runtimeClassName"), shutdown_after=r.get("shutdownAfterSeconds"),
            wait=r.get("wait", True), timeout=180))

    def suspend(self, r: Dict[str, Any]) -> Outcome:
        return self._do(lambda: self.client(r["as"]).get(r["name"]).suspend(wait=r.get("wait", True), timeout=90))

    def resume(self, r: Dict[str, Any]) -> Outcome:
        return self._do(lambda: self.client(r["as"]).get(r["name"]).resume(wait=True, timeout=120))

    def wait(self, r: Dict[str, Any]) -> Outcome:
        def go() -> Any:
            sb = self.client(r["as"]).get(r["name"])
            return sb.wait_suspended(timeout=90) if r.get("for") == "suspended" else sb.wait_ready(timeout=120)
        return self._do(go)

    def delete(self, r: Dict[str, Any], kept: Kept) -> Outcome:
        """Sandbox.delete() of the Sandbox the create returned (its uid the precondition)."""
        identity, made = kept
        if identity != r["as"]:
            raise AssertionError(f"the Sandbox was created as {identity}: Python deletes it through "
                                 f"that client, not as {r['as']}")
        try:
            return Outcome(True, deleted=made.handle.delete(timeout=90))
        except self.sbx.SandboxError as e:
            return Outcome(False, error=type(e).__name__, message=e.message)

    def matches(self, out: Outcome, kind: str, errors: Dict[str, Any]) -> bool:
        return out.error == errors[kind]["python"]


class PluginDriver:
    """kubectl sandbox, as a script runs it: exit codes and -o json."""

    name = "plugin"

    def __init__(self, ns: str) -> None:
        self.ns = ns

    def _run(self, identity: str, args: List[str], tail: Optional[List[str]] = None) -> Outcome:
        argv = ["kubectl", "sandbox", "--kubeconfig", kubeconfig(identity), "-n", self.ns] + args + ["-o", "json"]
        if tail:
            argv += ["--"] + tail
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            return Outcome(False, error=p.returncode, message=p.stderr.strip())
        try:
            obj = json.loads(p.stdout) if p.stdout.strip() else None
        except ValueError:
            obj = None
        return Outcome(True, obj=obj)

    def create(self, r: Dict[str, Any], defaults: Dict[str, Any]) -> Outcome:
        spec = spec_of(r, defaults)
        args = ["create", r["name"], "--image", spec["image"], "--key", r["key"], "--timeout", "3m"]
        if r.get("owner"):
            args += ["--owner", r["owner"]]
        if r.get("runtimeClassName"):
            args += ["--runtime-class", r["runtimeClassName"]]
        if r.get("shutdownAfterSeconds"):
            args += ["--ttl", f"{r['shutdownAfterSeconds']}s"]
        if r.get("wait", True):
            args.append("--wait")
        return self._run(r["as"], args, spec["command"])

    def suspend(self, r: Dict[str, Any]) -> Outcome:
        return self._run(r["as"], ["suspend", r["name"]] + (["--wait"] if r.get("wait", True) else []))

    def resume(self, r: Dict[str, Any]) -> Outcome:
        return self._run(r["as"], ["resume", r["name"], "--wait"])

    def wait(self, r: Dict[str, Any]) -> Outcome:
        return self._run(r["as"], ["wait", r["name"], "--for", r.get("for", "ready")])

    def delete(self, r: Dict[str, Any], kept: Kept) -> Outcome:
        """delete NAME --uid UID (the uid create -o json printed): exit 0 when
        it deleted the Sandbox, 3 when it was gone."""
        uid = ((kept[1].obj or {}).get("metadata") or {}).get("uid")
        if not uid:
            raise AssertionError("the kept create printed no uid")
        out = self._run(r["as"], ["delete", r["name"], "--uid", uid])
        if out.ok:
            out.deleted = True
        elif out.error == 3:
            out = Outcome(True, deleted=False, message=out.message)
        return out

    def matches(self, out: Outcome, kind: str, errors: Dict[str, Any]) -> bool:
        return out.error == errors[kind]["plugin"]


# ------------------------------------------------------------------ runner


def run_case(driver: Any, case: Dict[str, Any], table: Dict[str, Any], ns: str) -> None:
    defaults, errors = table["defaults"], table["errors"]
    precreated: Dict[str, str] = {}
    kept: Dict[str, Kept] = {}
    for i, step in enumerate(case["steps"]):
        (kind, body), = [(k, v) for k, v in step.items() if k != "expect"]
        where = f"step {i + 1} ({kind} {body.get('name', '')})"
        if kind in HARNESS_STEPS:
            try:
                uid = harness(ns, kind, body, defaults)
            except AssertionError as e:
                raise AssertionError(f"{where}: {e}") from None
            if uid:
                precreated[body["name"]] = uid
            continue
        expect = step.get("expect", "ok")
        runs = [body]
        if "repeat" in body:
            runs = [dict(body, name=f"{body['name']}-{n}", key=f"{body['key']}-{n}") for n in range(body["repeat"])]
        runs += [body] * (body.get("times", 1) - 1)
        for r in runs:
            if kind == "create":
                out = driver.create(r, defaults)
            elif kind == "delete":
                if r.get("uid") not in kept:
                    raise AssertionError(f"{where}: no Sandbox kept as {r.get('uid')!r}")
                out = driver.delete(r, kept[r["uid"]])
            else:
                out = getattr(driver, kind)(r)
            if expect == "ok":
                if not out.ok:
                    raise AssertionError(f"{where}: {out.error}: {out.message}")
                uid = (out.obj or {}).get("metadata", {}).get("uid")
                if kind == "create" and r["name"] in precreated and uid != precreated[r["name"]]:
                    raise AssertionError(f"{where}: returned uid {uid}, the stored object's is "
                                         f"{precreated[r['name']]}")
                if kind == "create" and r.get("keep"):
                    kept[r["keep"]] = (r["as"], out)
                if kind == "delete" and "deleted" in r and out.deleted != r["deleted"]:
                    raise AssertionError(f"{where}: deleted {out.deleted}, want {r['deleted']}")
            elif out.ok:
                raise AssertionError(f"{where}: succeeded, want {expect}")
            elif not driver.matches(out, expect, errors):
                raise AssertionError(f"{where}: {out.error} ({out.message}), want {expect}")
            elif not out.message:
                raise AssertionError(f"{where}: {expect} without the server's message")


def run(driver: Any, table: Dict[str, Any], ns: str) -> int:
    passed = failed = 0
    for case in table["cases"]:
        t0 = time.monotonic()
        try:
            run_case(driver, case, table, ns)
            passed += 1
            print(f"PASS {driver.name} {case['name']} ({time.monotonic() - t0:.1f}s)", flush=True)
        except AssertionError as e:
            failed += 1
            print(f"FAIL {driver.name} {case['name']}: {e}", flush=True)
    print(f"{driver.name}: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


def main(argv: List[str]) -> int:
    if len(argv) == 4 and argv[0] == "run" and argv[1] in ("python", "plugin"):
        table = yaml.safe_load(open(argv[2]))
        driver = PythonDriver(argv[3]) if argv[1] == "python" else PluginDriver(argv[3])
        return run(driver, table, argv[3])
    if len(argv) == 5 and argv[0] == "harness":
        table = yaml.safe_load(open(argv[1]))
        try:
            print(harness(argv[2], argv[3], json.loads(argv[4]), table["defaults"]))
        except AssertionError as e:
            print(str(e), file=sys.stderr)
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
