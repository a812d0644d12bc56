"""sandbox-client: create sandbox-controller Sandboxes exactly once, run
commands and move files in them, through the Kubernetes API.

    import sandbox_client as sbx

    client = sbx.Client(namespace="team-a")
    with client.create("registry.local/agent:1.0", ["sleep", "infinity"],
                       owner="alice", key="task-42", shutdown_after="2h") as sb:
        sb.write_file("notes.txt", "hello\\n")
        code, out, err = sb.run(["cat", "notes.txt"])

See the package README for the guarantees and the errors.
"""

from ._exec import ExecResult
from ._rest import RetryPolicy
from .client import Client, create, default_client, get, list_sandboxes
from .errors import (
    ApiError,
    ExecError,
    ExecTimeout,
    Expired,
    FileError,
    Forbidden,
    ForeignPodConflict,
    IdempotencyKeyConflict,
    IntentMismatch,
    LimitExceeded,
    NotFound,
    NotReady,
    OwnerNotAuthorized,
    QuotaExceeded,
    Rejected,
    SandboxError,
    SandboxFailed,
    TransportError,
    WaitTimeout,
)
from .sandbox import DirEntry, Sandbox

__version__ = "0.2.0"

__all__ = [
    "ApiError", "Client", "DirEntry", "ExecError", "ExecResult", "ExecTimeout", "Expired", "FileError",
    "Forbidden", "ForeignPodConflict", "IdempotencyKeyConflict", "IntentMismatch", "LimitExceeded",
    "NotFound", "NotReady", "OwnerNotAuthorized", "QuotaExceeded", "Rejected", "RetryPolicy", "Sandbox", "SandboxError",
    "SandboxFailed", "TransportError", "WaitTimeout", "__version__", "create", "default_client", "get",
    "list_sandboxes",
]
