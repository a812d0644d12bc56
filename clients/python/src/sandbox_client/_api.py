"""The API operations on one Sandbox object that the :class:`Client` and each
:class:`Sandbox` share: read it, wait for a state by watch, patch it,
delete it and wait until it is gone, each retried under the client's policy.
Internal: ``client`` makes one and hands it to the Sandboxes it returns, so
that ``client`` and ``sandbox`` never import each other."""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any, Dict, Optional, Tuple, cast

from kubernetes.client.exceptions import ApiException

from . import _rest
from ._exec import Connector
from ._rest import Deadline, Rest, RetryPolicy, sandboxes_path, typed_error, with_retries
from ._state import classify, describe_conditions
from .errors import ApiError, NotFound, SandboxError, WaitTimeout

log = logging.getLogger("sandbox_client")


class SandboxApi:
    """What a client talks to the API server with: its REST layer, retry
    policy, exec connector and default namespace."""

    def __init__(self, rest: Rest, retry: RetryPolicy, connector: Connector, namespace: str) -> None:
        self.rest = rest
        self.retry = retry
        self.connector = connector
        self.namespace = namespace

    def get_raw(self, ns: str, name: str, deadline: Optional[Deadline] = None) -> Dict[str, Any]:
        d = deadline or Deadline(self.rest.request_timeout * 4, self.retry.clock)
        try:
            obj: Any = with_retries(lambda: self.rest.call("GET", sandboxes_path(ns, name)),
                               f"get Sandbox {ns}/{name}", d, self.retry)
        except Exception as exc:  # noqa: BLE001
            raise typed_error(exc, ns, name) from None
        if not isinstance(obj, dict):
            raise ApiError(f"unexpected answer for Sandbox {ns}/{name}", namespace=ns, name=name)
        return obj

    def wait(self, ns: str, name: str, want: str, deadline: Deadline, timeout: float,
              obj: Optional[Dict[str, Any]] = None, uid: Optional[str] = None) -> Dict[str, Any]:
        """Waits by watch until the Sandbox is in state ``want``, from ``obj``
        (a fresh answer) or a read; raises the typed error of a state it will
        never leave, :class:`NotFound` when the name holds another Sandbox than
        the one of ``uid`` (or ``obj``, or the first read), or
        :class:`WaitTimeout`."""
        last = obj
        mine = [uid or _uid(obj)]

        def check(o: Dict[str, Any]) -> bool:
            now = _uid(o)
            if mine[0] is None:
                mine[0] = now
            elif now is not None and now != mine[0]:
                raise NotFound(f"Sandbox {ns}/{name} was deleted while waiting for {want}: the name now holds "
                               f"another Sandbox (uid {now})", namespace=ns, name=name, status=404)
            out = classify(o, want)
            if out.error:
                raise out.error
            return out.done

        need_get = last is None
        delay = self.retry.initial
        while True:
            if need_get:
                last = self.get_raw(ns, name, deadline)
                need_get = False
            assert last is not None
            if check(last):
                return last
            left = deadline.remaining()
            if left <= 0:
                raise WaitTimeout(f"Sandbox {ns}/{name} not {want} after {timeout:g}s: {describe_conditions(last)}",
                                  namespace=ns, name=name)
            rv = (last.get("metadata") or {}).get("resourceVersion") or ""
            span = max(1, int(min(left, 300)))
            q = [("fieldSelector", f"metadata.name={name}"), ("resourceVersion", rv),
                 ("allowWatchBookmarks", "true"), ("timeoutSeconds", str(span))]
            try:
                with contextlib.closing(self.rest.watch(sandboxes_path(ns), q, timeout=span + 15)) as events:
                    last, done, need_get = self._follow(events, ns, name, want, last, check, deadline)
                if done:
                    return last
                delay = self.retry.initial
            except SandboxError:
                raise
            except Exception as exc:  # noqa: BLE001 - a broken watch is re-opened
                # (a connection that broke, or an ERROR event the retry policy retries)
                if _rest.retry_after(exc) is None:
                    raise typed_error(exc, ns, name) from None
                log.info("watch Sandbox %s/%s: %s; re-reading", ns, name, _rest.describe(exc))
                wait = min(delay, max(0.0, deadline.remaining()))
                self.retry.sleep(wait)
                delay = min(delay * 2, self.retry.maximum)
                need_get = True

    def _follow(self, events: Any, ns: str, name: str, want: str, last: Dict[str, Any],
                check: Any, deadline: Deadline) -> Tuple[Dict[str, Any], bool, bool]:
        """Reads watch events until the state is reached (done), the watch
        is too old (read afresh) or it ends; returns (last object, done,
        read afresh)."""
        rv = (last.get("metadata") or {}).get("resourceVersion") or ""
        for ev in events:
            t, o = ev.get("type"), ev.get("object") or {}
            if t == "ERROR":
                if o.get("code") == 410:  # too old: read afresh
                    return last, False, True
                # As the answer it stands for: one the retry policy retries
                # (5xx such as a broken stream or an etcd timeout, 429) reopens
                # the watch; any other ends the wait, typed.
                raise _event_error(o)
            if t == "BOOKMARK":
                rv = (o.get("metadata") or {}).get("resourceVersion") or rv
                last.setdefault("metadata", {})["resourceVersion"] = rv
                continue
            if t == "DELETED":
                raise NotFound(f"Sandbox {ns}/{name} was deleted while waiting for {want}",
                               namespace=ns, name=name, status=404)
            if t in ("ADDED", "MODIFIED"):
                last = o
                if check(o):
                    return o, True, False
            if deadline.remaining() <= 0:
                break
        return last, False, False

    def get_pod(self, ns: str, name: str) -> Optional[Dict[str, Any]]:
        """The pod ``ns/name``, or None when there is none."""
        d = Deadline(self.rest.request_timeout * 4, self.retry.clock)
        try:
            obj: Any = with_retries(lambda: self.rest.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}"),
                                    f"get pod {ns}/{name}", d, self.retry)
        except Exception as exc:  # noqa: BLE001
            if isinstance(exc, ApiException) and exc.status == 404:
                return None
            raise typed_error(exc, ns, name) from None
        return obj if isinstance(obj, dict) else None

    def patch(self, ns: str, name: str, patch: Dict[str, Any], timeout: float = 60.0,
              uid: Optional[str] = None) -> Dict[str, Any]:
        """A merge patch; with ``uid``, only of the Sandbox of that uid (the
        API server refuses it, 409, for another object of the same name)."""
        if uid:
            patch = dict(patch, metadata={"uid": uid})
        deadline = Deadline(timeout, self.retry.clock)
        try:
            return cast(Dict[str, Any], with_retries(
                lambda: self.rest.call("PATCH", sandboxes_path(ns, name), query=[("fieldValidation", "Strict")],
                                       body=patch, content_type="application/merge-patch+json"),
                f"patch Sandbox {ns}/{name}", deadline, self.retry))
        except Exception as exc:  # noqa: BLE001
            raise typed_error(exc, ns, name) from None

    def delete(self, ns: str, name: str, timeout: float = 60.0, uid: Optional[str] = None) -> bool:
        """Deletes; True when this call deleted it, False when it was gone.
        A retry that finds it gone counts as deleted (the lost answer did it).
        With ``uid``, only the Sandbox of that uid: another one re-created
        under the name is left alone (False).

        The Sandbox is read first, so that "gone" is decided by what stood
        there when the call began: a delete of one gone already whose refusal
        (404, or the uid's 409) was lost meets the same refusal when sent
        again, and without the read would count as deleted."""
        deadline = Deadline(timeout, self.retry.clock)
        try:
            stored = self.get_raw(ns, name, deadline)
        except NotFound:
            return False
        if uid and (stored.get("metadata") or {}).get("uid") != uid:
            return False
        tried = [0]
        body: Dict[str, Any] = {"propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}

        def delete() -> Any:
            tried[0] += 1
            return self.rest.call("DELETE", sandboxes_path(ns, name), body=body)

        try:
            with_retries(delete, f"delete Sandbox {ns}/{name}", deadline, self.retry)
            return True
        except Exception as exc:  # noqa: BLE001
            if isinstance(exc, ApiException) and exc.status == 404:
                return tried[0] > 1
            if uid and isinstance(exc, ApiException) and exc.status == 409 and uid_precondition_failed(str(exc.body)):
                return tried[0] > 1  # another object of the name: this one is gone
            raise typed_error(exc, ns, name) from None

    def wait_gone(self, ns: str, name: str, uid: Optional[str], timeout: float) -> None:
        deadline = Deadline(timeout, self.retry.clock)
        while True:
            try:
                obj = self.get_raw(ns, name, deadline)
            except NotFound:
                return
            if uid and (obj.get("metadata") or {}).get("uid") != uid:
                return
            if deadline.remaining() <= 0:
                raise WaitTimeout(f"Sandbox {ns}/{name} still there after {timeout:g}s", namespace=ns, name=name)
            rv = (obj.get("metadata") or {}).get("resourceVersion") or ""
            span = max(1, int(min(deadline.remaining(), 60)))
            q = [("fieldSelector", f"metadata.name={name}"), ("resourceVersion", rv), ("timeoutSeconds", str(span))]
            try:
                with contextlib.closing(self.rest.watch(sandboxes_path(ns), q, timeout=span + 15)) as events:
                    for ev in events:
                        if ev.get("type") == "DELETED":
                            return
                        if ev.get("type") == "ERROR":
                            break
            except Exception as exc:  # noqa: BLE001
                if _rest.retry_after(exc) is None:
                    raise typed_error(exc, ns, name) from None
                self.retry.sleep(min(self.retry.initial, max(0.0, deadline.remaining())))


def uid_precondition_failed(body: str) -> bool:
    """A delete guarded by a uid was refused because the name holds another
    object. The API server's words changed across releases: "Precondition
    failed: UID in precondition: ..." before, "the UID in the precondition
    (...) does not match the UID in record (...)" in 1.35."""
    return "UID in the precondition" in body or "UID in precondition" in body


def _event_error(st: Dict[str, Any]) -> ApiException:
    """A watch's ERROR event (a ``metav1.Status``) as the API error it reports."""
    code = st.get("code")
    exc = ApiException(status=code if isinstance(code, int) else None, reason=st.get("reason"))
    exc.body = json.dumps(st)
    return exc


def _uid(obj: Optional[Dict[str, Any]]) -> Optional[str]:
    uid = ((obj or {}).get("metadata") or {}).get("uid")
    return None if uid is None else str(uid)
