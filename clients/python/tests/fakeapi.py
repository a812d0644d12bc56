"""Scripted API answers under the official client: a stand-in for the urllib3
pool manager inside ``kubernetes.client.ApiClient``. Everything above it (the
client's request building, its ApiException, this package) is real."""

from __future__ import annotations

import io
import json
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import urllib3
from kubernetes.client import ApiClient, Configuration

import sandbox_client
from sandbox_client import Client, RetryPolicy


@dataclass
class Request:
    method: str
    path: str
    query: Dict[str, List[str]]
    body: Any
    headers: Dict[str, str]


Answer = Union[Tuple[int, Any], Tuple[int, Any, Dict[str, str]], BaseException, Callable[[Request], Any]]


def status(code: int, reason: str, message: str) -> Dict[str, Any]:
    """A metav1.Status body."""
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": message}


class BrokenBody(io.RawIOBase):
    """A response body that gives ``data`` and then fails like a reset
    connection."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.done = False

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.data:
            n = min(len(b), len(self.data))
            b[:n] = self.data[:n]
            self.data = self.data[n:]
            return n
        raise ConnectionResetError(104, "Connection reset by peer")


@dataclass
class Rule:
    method: str
    path: re.Pattern
    answers: List[Answer]
    repeat_last: bool = False


class FakeApi:
    """Rules are matched in the order added; each answers its requests in
    order (the last one again with ``repeat_last``). An unmatched request
    fails the test."""

    def __init__(self) -> None:
        self.rules: List[Rule] = []
        self.requests: List[Request] = []

    def on(self, method: str, path: str, *answers: Answer, repeat_last: bool = False) -> "FakeApi":
        self.rules.append(Rule(method, re.compile("^" + path + "$"), list(answers), repeat_last))
        return self

    def of(self, method: str, path_re: str = ".*") -> List[Request]:
        rx = re.compile("^" + path_re + "$")
        return [r for r in self.requests if r.method == method and rx.match(r.path)]

    # the urllib3.PoolManager interface the official client uses
    def request(self, method: str, url: str, fields: Any = None, body: Any = None, headers: Any = None,
                preload_content: bool = True, timeout: Any = None, **kw: Any) -> urllib3.HTTPResponse:
        u = urllib.parse.urlsplit(url)
        query = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        for k, v in fields or []:
            query.setdefault(k, []).append(str(v))
        parsed = json.loads(body) if isinstance(body, (str, bytes)) and body else body
        req = Request(method, u.path, query, parsed, dict(headers or {}))
        self.requests.append(req)
        for rule in self.rules:
            if rule.method == method and rule.path.match(u.path) and rule.answers:
                ans = rule.answers[0] if (rule.repeat_last and len(rule.answers) == 1) else rule.answers.pop(0)
                return self._answer(ans, req, preload_content)
        raise AssertionError(f"unexpected request {method} {u.path} {query}")

    def _answer(self, ans: Answer, req: Request, preload: bool) -> urllib3.HTTPResponse:
        if callable(ans) and not isinstance(ans, BaseException):
            ans = ans(req)
        if isinstance(ans, BaseException):
            raise ans
        code, payload = ans[0], ans[1]
        headers = {"Content-Type": "application/json"}
        if len(ans) > 2:
            headers.update(ans[2])  # type: ignore[misc]
        if isinstance(payload, BrokenBody):
            fp: Any = io.BufferedReader(payload)
        else:
            if isinstance(payload, (bytes, str)):
                data = payload.encode() if isinstance(payload, str) else payload
            elif isinstance(payload, list):  # watch events, one per line
                data = b"".join(json.dumps(e).encode() + b"\n" for e in payload)
            else:
                data = json.dumps(payload).encode()
            fp = io.BytesIO(data)
        return urllib3.HTTPResponse(body=fp, status=code, headers=headers, preload_content=preload,
                                    reason="x")


@dataclass
class Clock:
    """A fake clock: ``sleep`` moves it on and records the waits."""

    now: float = 1000.0
    sleeps: List[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def client(api: FakeApi, clock: Optional[Clock] = None, connector: Any = None, namespace: str = "team-a") -> Client:
    """A Client whose requests the FakeApi answers, on a fake clock."""
    cfg = Configuration(host="https://api.test")
    cfg.retries = False
    ac = ApiClient(cfg)
    ac.rest_client.pool_manager = api
    clock = clock or Clock()
    policy = RetryPolicy(sleep=clock.sleep, clock=clock, rand=lambda: 0.0)
    return Client(namespace, api_client=ac, retry=policy, connector=connector)


def sandbox_obj(name: str = "s1", ns: str = "team-a", spec: Optional[Dict[str, Any]] = None,
                status: Optional[Dict[str, Any]] = None, generation: int = 1, rv: str = "10",
                **meta: Any) -> Dict[str, Any]:
    """A stored Sandbox as the API server returns it (defaults applied)."""
    s = {"image": "img:1", "resources": {"requests": {"cpu": "2", "memory": "4Gi"},
                                         "limits": {"cpu": "2", "memory": "4Gi"}}}
    s.update(spec or {})
    md = {"name": name, "namespace": ns, "uid": f"uid-{name}", "generation": generation,
          "resourceVersion": rv, "creationTimestamp": "2026-05-01T10:00:00Z"}
    md.update(meta)
    o: Dict[str, Any] = {"apiVersion": "sandbox.dev/v1alpha1", "kind": "Sandbox", "metadata": md, "spec": s}
    if status is not None:
        o["status"] = status
    return o


def cond(ctype: str, st: str, reason: str, message: str = "") -> Dict[str, Any]:
    return {"type": ctype, "status": st, "reason": reason, "message": message}


def ready_status(pod: str = "sbx-0123", gen: int = 1) -> Dict[str, Any]:
    return {"phase": "Running", "podName": pod, "observedGeneration": gen,
            "conditions": [cond("Bound", "True", "PodCreated"), cond("Ready", "True", "PodReady")]}


def pending_status(gen: int = 1) -> Dict[str, Any]:
    return {"phase": "Pending", "podName": "sbx-0123", "observedGeneration": gen,
            "conditions": [cond("Bound", "True", "PodCreated"), cond("Ready", "False", "PodPending")]}


SANDBOXES = "/apis/sandbox.dev/v1alpha1/namespaces/team-a/sandboxes"
ONE = SANDBOXES + "/[^/]+"
PODS = "/api/v1/namespaces/team-a/pods/[^/]+"


def owned_pod(uid: str = "pod-uid-1", owner: str = "s1", owner_uid: Optional[str] = None,
              **meta: Any) -> Dict[str, Any]:
    """The bound pod of Sandbox ``owner`` (owned by its uid), as read."""
    md: Dict[str, Any] = {"name": "sbx-0123", "namespace": "team-a", "uid": uid,
                          "ownerReferences": [{"apiVersion": "sandbox.dev/v1alpha1", "kind": "Sandbox",
                                               "name": owner, "uid": owner_uid or f"uid-{owner}",
                                               "controller": True}]}
    md.update(meta)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md}

__all__ = ["FakeApi", "Clock", "client", "sandbox_obj", "status", "cond", "ready_status", "pending_status",
           "BrokenBody", "SANDBOXES", "ONE", "sandbox_client"]
