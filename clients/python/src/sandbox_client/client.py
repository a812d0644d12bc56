"""The client: credentials, creating a Sandbox exactly once, waiting by
watch, reading and listing."""

from __future__ import annotations

import logging
import os
import secrets
import uuid
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, cast

import kubernetes.config
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException

from . import _rest
from ._api import SandboxApi
from ._duration import Duration, shutdown_time
from ._exec import Connector, websocket_connector
from ._intent import EnvLike, build_spec, identity_difference, intent_difference
from ._rest import Deadline, Rest, RetryPolicy, sandboxes_path, typed_error, with_retries
from ._state import READY
from .errors import (
    IdempotencyKeyConflict,
    IntentMismatch,
    SandboxFailed,
)
from .sandbox import Sandbox

log = logging.getLogger("sandbox_client")

_SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
_SA_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def _load(kubeconfig: Optional[str], context: Optional[str]) -> Tuple[Configuration, str]:
    """Credentials and default namespace, found as the controller finds
    them: an explicit kubeconfig, else ``$KUBECONFIG``, else the in-cluster
    ServiceAccount, else ``~/.kube/config``."""
    cfg = Configuration()
    in_cluster = (kubeconfig is None and not os.environ.get("KUBECONFIG")
                  and os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(_SA_TOKEN))
    if in_cluster:
        kubernetes.config.load_incluster_config(client_configuration=cfg)
        try:
            with open(_SA_NAMESPACE) as f:
                ns = f.read().strip() or "default"
        except OSError:
            ns = "default"
        return cfg, ns
    kubernetes.config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg,
                                       persist_config=False)
    ns = "default"
    try:
        contexts, active = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = active
        if context:
            chosen = next((c for c in contexts if c.get("name") == context), active)
        ns = ((chosen or {}).get("context") or {}).get("namespace") or "default"
    except Exception:  # noqa: BLE001 - the namespace is a convenience
        pass
    return cfg, ns


class Client:
    """A connection to one cluster, with a default namespace.

    ``Client()`` finds credentials as kubectl and the controller do (an
    explicit ``kubeconfig``, ``$KUBECONFIG``, the in-cluster ServiceAccount,
    ``~/.kube/config``); ``namespace`` defaults to the kubeconfig context's
    (or the ServiceAccount's) namespace. ``api_client`` replaces all of that
    with a ready ``kubernetes.client.ApiClient``.

    Every request is retried when its answer may hide a success (connection
    reset or refused, timeout, 5xx, 429 after its ``Retry-After``) until the
    call's own time is up; urllib3's own retries are turned off so that
    only this policy decides."""

    def __init__(
        self,
        namespace: Optional[str] = None,
        *,
        kubeconfig: Optional[str] = None,
        context: Optional[str] = None,
        api_client: Optional[ApiClient] = None,
        request_timeout: float = 30.0,
        retry: Optional[RetryPolicy] = None,
        connector: Optional[Connector] = None,
    ) -> None:
        if api_client is None:
            cfg, default_ns = _load(kubeconfig, context)
            cfg.retries = False
            api_client = ApiClient(cfg)
        else:
            default_ns = "default"
        self.api_client = api_client
        self.namespace: str = namespace or default_ns
        self.retry = retry or RetryPolicy()
        self.rest = Rest(api_client, request_timeout)
        self.connector: Connector = connector or websocket_connector(api_client)
        self._api = SandboxApi(self.rest, self.retry, self.connector, self.namespace)

    # ------------------------------------------------------------ create

    def create(
        self,
        image: str,
        command: Optional[Sequence[str]] = None,
        *,
        args: Optional[Sequence[str]] = None,
        env: Optional[EnvLike] = None,
        owner: Optional[str] = None,
        key: Optional[str] = None,
        resources: Optional[Mapping[str, Any]] = None,
        runtime_class: Optional[str] = None,
        network_profiles: Optional[Sequence[str]] = None,
        shutdown_after: Optional[Duration] = None,
        shutdown_policy: Optional[str] = None,
        name: Optional[str] = None,
        namespace: Optional[str] = None,
        labels: Optional[Mapping[str, str]] = None,
        annotations: Optional[Mapping[str, str]] = None,
        wait: bool = True,
        timeout: float = 300.0,
    ) -> Sandbox:
        """Creates one Sandbox for this request, exactly once, and (with
        ``wait``) waits until its pod is Ready.

        ``key`` is the idempotency key; without one a fresh key is made for
        this call. ``name`` is the object's name; without one a fresh name is
        made. Both stay the same across this call's retries (never
        ``generateName``: a retried generateName POST makes a second
        object), so a create whose response was lost is retried into the
        same object: the API answers ``AlreadyExists``, and the stored
        Sandbox is read and checked to be this request (same key, owner and
        spec as sent; the server's defaults are accounted for). Another
        request's object raises :class:`IntentMismatch` or
        :class:`IdempotencyKeyConflict`, never returns; this request's own
        object being deleted raises :class:`SandboxFailed`.

        ``owner`` mounts that owner's workspace (the caller must be allowed
        to ``use`` it: :class:`OwnerNotAuthorized` otherwise). ``resources``
        is core/v1 ResourceRequirements, or ``{"cpu": "1", "memory": "2Gi"}``
        for requests = limits (default cpu 2, memory 4Gi). ``shutdown_after``
        (a ``timedelta``, seconds, or ``"2h"``) sets
        ``spec.lifecycle.shutdownTime``; ``shutdown_policy`` is ``Retain``
        or ``Delete``. ``network_profiles`` names the operator's
        SandboxNetworkProfiles whose egress the pod gets
        (``spec.network.profiles``; the caller must be allowed to ``use``
        each: refused with the server's message otherwise).

        ``timeout`` bounds the whole call, retries and wait included
        (:class:`WaitTimeout`). Errors carry the server's message:
        :class:`OwnerNotAuthorized`, :class:`IdempotencyKeyConflict`,
        :class:`ForeignPodConflict`, :class:`QuotaExceeded`, :class:`Rejected`,
        :class:`Expired`, :class:`SandboxFailed`. A Sandbox that was created is never deleted
        on an error; the error names it."""
        ns = namespace or self.namespace
        lifecycle: Dict[str, Any] = {}
        if shutdown_after is not None:
            lifecycle["shutdownTime"] = shutdown_time(shutdown_after)
        if shutdown_policy is not None:
            if shutdown_policy not in ("Retain", "Delete"):
                raise ValueError("shutdown_policy is Retain or Delete")
            lifecycle["shutdownPolicy"] = shutdown_policy
        spec = build_spec(image, command=command, args=args, env=env, owner=owner,
                          key=key if key is not None else f"sbxc-{uuid.uuid4()}",
                          resources=resources, runtime_class=runtime_class, lifecycle=lifecycle,
                          network_profiles=network_profiles)
        name = name or f"sandbox-{secrets.token_hex(5)}"
        metadata: Dict[str, Any] = {"name": name, "namespace": ns}
        if labels:
            metadata["labels"] = dict(labels)
        if annotations:
            metadata["annotations"] = dict(annotations)
        body = {"apiVersion": _rest.API_VERSION, "kind": "Sandbox", "metadata": metadata, "spec": spec}
        deadline = Deadline(timeout, self.retry.clock)
        obj = self._create_once(ns, name, body, deadline)
        sb = Sandbox(self._api, obj)
        if wait:
            sb._obj = self._api.wait(ns, name, READY, deadline, timeout, obj)
        return sb

    def _create_once(self, ns: str, name: str, body: Dict[str, Any], deadline: Deadline) -> Dict[str, Any]:
        what = f"create Sandbox {ns}/{name}"
        attempts = [0]

        def post() -> Any:
            attempts[0] += 1
            return self.rest.call("POST", sandboxes_path(ns), query=[("fieldValidation", "Strict")], body=body)

        try:
            obj = with_retries(post, what, deadline, self.retry)
            log.info("%s: created (attempt %d)", what, attempts[0])
            return cast(Dict[str, Any], obj)
        except Exception as exc:  # noqa: BLE001 - classified below
            if not (isinstance(exc, ApiException) and exc.status == 409
                    and _rest.status_of(exc).get("reason") == "AlreadyExists"):
                raise typed_error(exc, ns, name, creating=True) from None
        # AlreadyExists: our own earlier attempt (its answer lost), an earlier
        # call with the same name, or someone else's object. Read and check.
        stored = self._api.get_raw(ns, name, deadline)
        sent = body["spec"]
        have = stored.get("spec") or {}
        why = identity_difference(sent, have)
        if why:
            raise IntentMismatch(f"Sandbox {ns}/{name} already exists and is another request: {why}",
                                 namespace=ns, name=name, status=409, reason="AlreadyExists")
        why = intent_difference(sent, have)
        if why:
            raise IdempotencyKeyConflict(
                f"Sandbox {ns}/{name} already exists with the same key and owner but another spec: {why}",
                namespace=ns, name=name, status=409, reason="AlreadyExists")
        if (stored.get("metadata") or {}).get("deletionTimestamp"):
            raise SandboxFailed(f"Sandbox {ns}/{name} exists but is being deleted", namespace=ns, name=name,
                                reason="Deleting")
        log.info("%s: exists already and is this request (attempt %d)", what, attempts[0])
        return stored

    # ------------------------------------------------------------- reads

    def get(self, name: str, namespace: Optional[str] = None) -> Sandbox:
        """The Sandbox of that name (:class:`NotFound` when there is none)."""
        return Sandbox(self._api, self._api.get_raw(namespace or self.namespace, name))

    def list(self, *, owner: Optional[str] = None, key: Optional[str] = None,
             namespace: Optional[str] = None, timeout: float = 120.0) -> List[Sandbox]:
        """The namespace's Sandboxes, only those of ``owner`` and/or with
        idempotency ``key`` when given, sorted by name. Read in pages of 500."""
        ns = namespace or self.namespace
        deadline = Deadline(timeout, self.retry.clock)
        out: List[Sandbox] = []
        cont = ""
        while True:
            q = [("limit", "500")] + ([("continue", cont)] if cont else [])
            try:
                page: Any = with_retries(lambda: self.rest.call("GET", sandboxes_path(ns), query=q),
                                    f"list Sandboxes in {ns}", deadline, self.retry)
            except Exception as exc:  # noqa: BLE001
                raise typed_error(exc, ns) from None
            for item in (page or {}).get("items") or []:
                spec = item.get("spec") or {}
                if owner is not None and spec.get("workspaceOwner") != owner:
                    continue
                if key is not None and spec.get("idempotencyKey") != key:
                    continue
                out.append(Sandbox(self._api, item))
            cont = ((page or {}).get("metadata") or {}).get("continue") or ""
            if not cont:
                break
        return sorted(out, key=lambda s: s.name)

_default: Optional[Client] = None


def default_client() -> Client:
    """The module's shared :class:`Client` (made on first use)."""
    global _default
    if _default is None:
        _default = Client()
    return _default


def create(image: str, command: Optional[Sequence[str]] = None, **kw: Any) -> Sandbox:
    """:meth:`Client.create` on the default client."""
    return default_client().create(image, command, **kw)


def get(name: str, namespace: Optional[str] = None) -> Sandbox:
    """:meth:`Client.get` on the default client."""
    return default_client().get(name, namespace)


def list_sandboxes(**kw: Any) -> List[Sandbox]:
    """:meth:`Client.list` on the default client."""
    return default_client().list(**kw)


__all__ = ["Client", "create", "get", "list_sandboxes", "default_client"]
