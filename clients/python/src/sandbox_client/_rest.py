"""Talking to the API server: one request at a time over the official client's
``ApiClient``, the retry policy for answers that may hide a success, and the
translation of API answers into this package's typed errors.

Why not the generated ``CustomObjectsApi``: it cannot send ``fieldValidation``
(so an unknown field, such as ``spec.lifecycle`` on a server that does not
know it, would be dropped silently), and the retry policy needs the answer's
headers (``Retry-After``). ``ApiClient.call_api`` gives both and keeps the
client's credentials handling (kubeconfig, in-cluster, token refresh).
"""

from __future__ import annotations

import http.client
import json
import logging
import random
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generator, List, Optional, Tuple

import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from .errors import (
    ApiError,
    Forbidden,
    IdempotencyKeyConflict,
    NotFound,
    OwnerNotAuthorized,
    QuotaExceeded,
    Rejected,
    SandboxError,
    TransportError,
)

log = logging.getLogger("sandbox_client")

GROUP = "sandbox.dev"
VERSION = "v1alpha1"
PLURAL = "sandboxes"
API_VERSION = f"{GROUP}/{VERSION}"

def sandboxes_path(namespace: str, name: Optional[str] = None) -> str:
    """The REST path of a namespace's Sandboxes, or of one of them."""
    p = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    return p + "/" + name if name else p


# ---------------------------------------------------------------- retries


@dataclass
class RetryPolicy:
    """How long to keep retrying and how to wait between attempts.

    ``initial`` doubles after each attempt up to ``maximum`` (seconds), with
    up to 25 % random jitter so that many clients do not retry in step; an
    answer's ``Retry-After`` is honoured as a lower bound. ``sleep`` and
    ``clock`` are injectable for tests."""

    initial: float = 0.1
    maximum: float = 5.0
    sleep: Callable[[float], None] = field(default=time.sleep)
    clock: Callable[[], float] = field(default=time.monotonic)
    rand: Callable[[], float] = field(default=random.random)


class Deadline:
    """A point in time on the policy's clock; ``None`` seconds never expires."""

    def __init__(self, seconds: Optional[float], clock: Callable[[], float]) -> None:
        self._clock = clock
        self._end = None if seconds is None else clock() + seconds

    def remaining(self) -> float:
        """Seconds left (may be negative); ``inf`` without a deadline."""
        return float("inf") if self._end is None else self._end - self._clock()


def retry_after(exc: BaseException) -> Optional[float]:
    """How long to wait before retrying after ``exc``, or ``None`` when it is
    not worth a retry.

    Retried: what the API may have done without telling (the connection was
    refused, reset or timed out, a TLS session broke, the answer was cut
    short), 5xx answers and 429 (``Retry-After`` seconds when given).
    Not retried: every other answer, and TLS certificate failures (no retry
    fixes those)."""
    if isinstance(exc, ApiException):
        if exc.status == 0:
            # The official client turns urllib3's SSLError into status 0.
            text = str(exc.reason or "")
            if text.startswith("SSLError") and "CERTIFICATE_VERIFY_FAILED" not in text and \
                    "certificate verify failed" not in text:
                return 0.0
            return None
        if exc.status == 429 or (exc.status is not None and exc.status >= 500):
            return _retry_after_header(exc.headers)
        return None
    if isinstance(exc, (urllib3.exceptions.LocationValueError, urllib3.exceptions.ProxySchemeUnknown)):
        return None
    if isinstance(exc, (urllib3.exceptions.HTTPError, http.client.HTTPException, ConnectionError,
                        socket.timeout, TimeoutError)):
        return 0.0
    return None


def _retry_after_header(headers: Any) -> float:
    if not headers:
        return 0.0
    value = None
    try:
        value = headers.get("Retry-After")
    except AttributeError:
        pass
    if value is None:
        return 0.0
    try:
        return max(0.0, float(str(value).strip()))
    except ValueError:
        return 0.0  # an HTTP date: rare from the API server; back off as usual


def with_retries(fn: Callable[[], Any], what: str, deadline: Deadline, policy: RetryPolicy,
                 on_retry: Optional[Callable[[int, BaseException], None]] = None) -> Any:
    """Calls ``fn`` until it returns or raises something :func:`retry_after`
    does not retry, or until the deadline leaves no time for the next wait;
    the last error is then raised as it came. ``on_retry(attempt, exc)`` is
    called before each wait."""
    delay = policy.initial
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - classified below
            wait = retry_after(exc)
            if wait is None:
                raise
            wait = max(wait, delay * (1.0 + 0.25 * policy.rand()))
            if deadline.remaining() <= wait:
                raise
            log.info("%s: attempt %d failed (%s); retrying in %.2fs", what, attempt, describe(exc), wait)
            if on_retry:
                on_retry(attempt, exc)
            policy.sleep(wait)
            delay = min(delay * 2, policy.maximum)


def describe(exc: BaseException) -> str:
    """A one-line account of an error for logs and messages."""
    if isinstance(exc, ApiException):
        if exc.status == 0:
            return f"transport: {exc.reason}"
        st = status_of(exc)
        return f"HTTP {exc.status}: {st.get('message') or exc.reason}"
    return f"{type(exc).__name__}: {exc}"


# ------------------------------------------------------------ API errors


def status_of(exc: ApiException) -> Dict[str, Any]:
    """The ``metav1.Status`` an API error carries (empty when it has none)."""
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not body:
        return {}
    try:
        st = json.loads(body)
    except ValueError:
        return {"message": str(body)[:2000]}
    return st if isinstance(st, dict) else {}


def is_transport(exc: BaseException) -> bool:
    """True for the failures of the connection itself (not an answer)."""
    if isinstance(exc, ApiException):
        return bool(exc.status == 0)
    return isinstance(exc, (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError))


def typed_error(exc: BaseException, namespace: Optional[str] = None, name: Optional[str] = None,
                creating: bool = False) -> BaseException:
    """The typed error for an API answer or a transport failure; any other
    exception (a bug, an interrupt) comes back as it is. A 403 is
    :class:`OwnerNotAuthorized` when it names the permission on
    ``workspaces.sandbox.dev``, :class:`QuotaExceeded` for ``exceeded quota``,
    else :class:`Forbidden`. With ``creating``,
    422 and 400 answers are the create's refusals: a key held by another spec
    is :class:`IdempotencyKeyConflict`, anything else about the object is
    :class:`Rejected`."""
    if isinstance(exc, SandboxError):
        return exc
    if is_transport(exc):
        return TransportError(f"cannot reach the API server: {describe(exc)}", namespace=namespace, name=name)
    if not isinstance(exc, ApiException):
        return exc
    st = status_of(exc)
    msg = str(st.get("message") or exc.reason or f"HTTP {exc.status}")
    reason = st.get("reason")
    kw: Dict[str, Any] = {"namespace": namespace, "name": name, "status": exc.status, "reason": reason}
    if exc.status == 404:
        return NotFound(msg, **kw)
    if exc.status == 403:
        if "workspaces.sandbox.dev" in msg:
            return OwnerNotAuthorized(msg, **kw)
        if "exceeded quota" in msg:  # a SandboxQuota in Reject mode, or a ResourceQuota
            return QuotaExceeded(msg, **kw)
        return Forbidden(msg, **kw)
    if creating and exc.status == 422 and "spec.idempotencyKey" in msg and "held by" in msg:
        return IdempotencyKeyConflict(msg, **kw)
    if creating and exc.status in (400, 422):
        return Rejected(msg, **kw)
    return ApiError(msg, **kw)


# ------------------------------------------------------------- requests


class Rest:
    """Single requests to the API server through an ``ApiClient``; JSON in
    and out. Each call is one attempt: callers wrap it in :func:`with_retries`
    where a retry is safe (every call here is, with the create's own check)."""

    def __init__(self, api_client: ApiClient, request_timeout: float = 30.0) -> None:
        self.api_client = api_client
        self.request_timeout = request_timeout

    def call(self, method: str, path: str, *, query: Optional[List[Tuple[str, str]]] = None,
             body: Any = None, content_type: str = "application/json",
             timeout: Optional[float] = None) -> Any:
        """One request; returns the decoded JSON answer (``None`` when empty)."""
        resp = self.api_client.call_api(
            path, method,
            query_params=query or [],
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=_timeout(timeout or self.request_timeout),
        )
        data = resp.data
        if not data:
            return None
        return json.loads(data)

    def watch(self, path: str, query: List[Tuple[str, str]], timeout: float) -> Generator[Dict[str, Any], None, None]:
        """The events of a watch (``?watch=1``), one decoded JSON object per
        line, until the server ends it. A line longer than 16 MiB is an error."""
        resp = self.api_client.call_api(
            path, "GET",
            query_params=query + [("watch", "1")],
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=_timeout(timeout),
        )
        try:
            buf = b""
            for chunk in resp.stream(64 * 1024, decode_content=True):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
                if len(buf) > 16 << 20:
                    raise ApiError("watch event larger than 16 MiB")
            if buf.strip():
                yield json.loads(buf)
        finally:
            # Closed, not only released: a watch left half read must not go
            # back to the pool with its stream still coming.
            resp.close()
            resp.release_conn()


def _timeout(seconds: float) -> Tuple[float, float]:
    # (connect, read): a connect that takes seconds is a dead server.
    return (min(10.0, seconds), seconds)
