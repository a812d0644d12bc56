"""Typed errors of the Sandbox client.

Every error carries the server's own message where there is one (``message``),
the Sandbox it concerns (``namespace``, ``name``, either may be ``None``) and,
for errors answered by the API server, the HTTP ``status`` code. Catch
:class:`SandboxError` for all of them.
"""

from __future__ import annotations

from typing import Optional


class SandboxError(Exception):
    """Base class of every error this package raises."""

    def __init__(
        self,
        message: str,
        *,
        namespace: Optional[str] = None,
        name: Optional[str] = None,
        status: Optional[int] = None,
        reason: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.namespace = namespace
        self.name = name
        self.status = status
        self.reason = reason

    def __str__(self) -> str:
        return self.message


class ApiError(SandboxError):
    """The API server refused a request (``status`` is its HTTP code,
    ``reason`` its ``Status.reason``, such as ``Invalid`` or ``Conflict``)."""


class TransportError(SandboxError):
    """The API server could not be reached, or connections kept breaking,
    until the call's time ran out."""


class NotFound(ApiError):
    """The Sandbox (or its pod) does not exist."""


class Forbidden(ApiError):
    """The API server or admission refused the request (HTTP 403)."""


class OwnerNotAuthorized(Forbidden):
    """The caller may not ``use`` the workspace owner: refused at create
    (HTTP 403 naming the owner and the missing permission), at exec by the
    exec gate, or reported by the controller as ``Bound=False/OwnerNotAuthorized``
    (a ``status`` of ``None`` then)."""


class QuotaExceeded(Forbidden):
    """A quota refused the Sandbox: a ``SandboxQuota`` in Reject mode (403
    ``exceeded quota`` at create, or ``phase: Rejected`` with
    ``Bound=False/QuotaExceeded``, a ``status`` of ``None`` then) or the API
    server's ResourceQuota (403 ``exceeded quota``). A Sandbox waiting for a
    slot (``QuotaWaiting``) is still waited for."""


class IdempotencyKeyConflict(SandboxError):
    """The key is held by another Sandbox with a different spec in the same
    scope: refused at create (HTTP 422 naming the holder) or reported as
    ``Bound=False/IdempotencyKeyConflict``, or an existing object of the same
    name, key and owner holds another spec."""


class IntentMismatch(SandboxError):
    """A Sandbox of the requested name exists and is another request (another
    key or owner). It is never returned as if it were this one."""


class ForeignPodConflict(SandboxError):
    """A pod the controller cannot verify holds the Sandbox's pod name
    (``Bound=False/ForeignPodConflict``); nothing of it is used."""


class Rejected(SandboxError):
    """The Sandbox can never get a pod: refused by the API (invalid spec) or
    ``phase: Rejected`` (for example ``InvalidSpec``)."""


class Expired(SandboxError):
    """The Sandbox reached its ``shutdownTime`` (``phase: Expired``); final."""


class SandboxFailed(SandboxError):
    """The bound pod failed, exited, went missing or was tampered with
    (``phase`` Failed or Succeeded, ``Ready`` reason such as ``PodMissing``)."""


class NotReady(SandboxError):
    """The Sandbox has no running pod to execute in (not bound yet, suspended)."""


class WaitTimeout(SandboxError, TimeoutError):
    """The wait ended before the Sandbox reached the state waited for; the
    message carries the last condition the server reported."""


class ExecError(SandboxError):
    """A command could not be run in the sandbox (the exec stream failed);
    not raised for a command that ran and exited non-zero."""


class ExecTimeout(ExecError, TimeoutError):
    """A command ran longer than its ``timeout``. The stream is closed; whether
    the process goes on in the pod depends on the container runtime."""


class LimitExceeded(SandboxError):
    """Output, a file or a listing was larger than the cap asked for."""


class FileError(SandboxError):
    """A file operation failed in the sandbox (``message`` is the command's
    stderr, ``exit_code`` its exit code)."""

    def __init__(
        self,
        message: str,
        *,
        exit_code: int = 1,
        namespace: Optional[str] = None,
        name: Optional[str] = None,
    ) -> None:
        super().__init__(message, namespace=namespace, name=name)
        self.exit_code = exit_code
