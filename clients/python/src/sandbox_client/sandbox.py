"""One Sandbox: its state, commands and files in its pod, its lifecycle."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import secrets
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _exec
from ._api import SandboxApi
from ._exec import ExecResult
from ._duration import Duration, parse_rfc3339, rfc3339, shutdown_time
from ._rest import Deadline
from ._state import READY, SUSPENDED, condition
from .errors import FileError, LimitExceeded, NotFound, NotReady

CONTAINER = "sandbox"  # the container the controller builds (controller/sandbox/podbuild.c)
MiB = 1 << 20


@dataclass(frozen=True)
class DirEntry:
    """One entry of :meth:`Sandbox.list_dir`: ``type`` is ``file``, ``dir``,
    ``symlink`` or ``other``; ``size`` is in bytes (0 unless a file)."""

    name: str
    type: str
    size: int


class Sandbox:
    """A Sandbox as last read from the API server (``refresh()`` reads it
    again). Use it as a context manager to delete it on exit."""

    def __init__(self, api: SandboxApi, obj: Dict[str, Any]) -> None:
        self._api = api
        self._obj = obj

    # ------------------------------------------------------------ state

    @property
    def raw(self) -> Dict[str, Any]:
        """The object as the API server last returned it."""
        return self._obj

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return str(self._obj["metadata"]["name"])

    @property
    def namespace(self) -> str:
        """``metadata.namespace``."""
        return str(self._obj["metadata"].get("namespace") or self._api.namespace)

    @property
    def uid(self) -> Optional[str]:
        """``metadata.uid``."""
        uid = self._obj["metadata"].get("uid")
        return None if uid is None else str(uid)

    @property
    def spec(self) -> Dict[str, Any]:
        """``spec`` as stored (with the server's defaults)."""
        return dict(self._obj.get("spec") or {})

    @property
    def status(self) -> Dict[str, Any]:
        """``status`` as the controller wrote it (empty before it has)."""
        return dict(self._obj.get("status") or {})

    @property
    def key(self) -> Optional[str]:
        """``spec.idempotencyKey``."""
        return self.spec.get("idempotencyKey")

    @property
    def owner(self) -> Optional[str]:
        """``spec.workspaceOwner``."""
        return self.spec.get("workspaceOwner")

    @property
    def phase(self) -> Optional[str]:
        """``status.phase``: Pending, Running, Succeeded, Failed, Rejected,
        Suspended or Expired."""
        return self.status.get("phase")

    @property
    def pod_name(self) -> Optional[str]:
        """The bound pod (``status.podName``)."""
        return self.status.get("podName") or None

    @property
    def ready(self) -> bool:
        """True when the ``Ready`` condition is True."""
        return condition(self._obj, "Ready").get("status") == "True"

    @property
    def shutdown_time(self) -> Optional[dt.datetime]:
        """``spec.lifecycle.shutdownTime``."""
        return parse_rfc3339((self.spec.get("lifecycle") or {}).get("shutdownTime"))

    def condition(self, ctype: str) -> Dict[str, Any]:
        """The ``Bound`` or ``Ready`` condition (empty when absent)."""
        return condition(self._obj, ctype)

    def refresh(self) -> "Sandbox":
        """Reads the Sandbox again; returns self."""
        self._obj = self._api.get_raw(self.namespace, self.name)
        return self

    def wait_ready(self, timeout: float = 300.0) -> "Sandbox":
        """Reads this Sandbox again and waits by watch until the pod is
        Ready (typed errors as :meth:`Client.create`; :class:`NotFound` once
        the name holds another Sandbox); returns self."""
        d = Deadline(timeout, self._api.retry.clock)
        self._obj = self._api.wait(self.namespace, self.name, READY, d, timeout, uid=self.uid)
        return self

    def wait_suspended(self, timeout: float = 120.0) -> "Sandbox":
        """Reads this Sandbox again and waits by watch until ``phase:
        Suspended``; returns self."""
        d = Deadline(timeout, self._api.retry.clock)
        self._obj = self._api.wait(self.namespace, self.name, SUSPENDED, d, timeout, uid=self.uid)
        return self

    def __repr__(self) -> str:
        return f"Sandbox({self.namespace}/{self.name}, phase={self.phase}, pod={self.pod_name})"

    # ------------------------------------------------------------- exec

    def _pod(self) -> str:
        """The bound pod's name, once the pod under it is checked to be this
        Sandbox's: the uid its status names (``status.podUID``, when given),
        owned by it, not being deleted. A command never runs in a pod that
        took the name since."""
        if not self.pod_name:
            self.refresh()
        if self.phase in ("Suspended", "Expired") or not self.pod_name:
            raise NotReady(f"Sandbox {self.namespace}/{self.name} has no running pod (phase {self.phase})",
                           namespace=self.namespace, name=self.name)
        pod = self._api.get_pod(self.namespace, str(self.pod_name))
        md = (pod or {}).get("metadata") or {}
        want = self.status.get("podUID")
        owned = any(r.get("uid") == self.uid for r in md.get("ownerReferences") or [])
        if not pod or (want and md.get("uid") != want) or not owned or md.get("deletionTimestamp"):
            raise NotReady(f"Sandbox {self.namespace}/{self.name}: pod {self.pod_name} is not its bound pod "
                           "(gone, replaced or being deleted); refresh and wait until it is Ready",
                           namespace=self.namespace, name=self.name)
        return str(self.pod_name)

    def _execute(self, argv: Sequence[str], timeout: Optional[float], max_output: int) -> ExecResult:
        return _exec.execute(self._api.connector, self.namespace, self._pod(), CONTAINER, argv, timeout,
                             max_output)

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: Union[bytes, str, None] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        timeout: Optional[float] = 600.0,
        max_output: int = 16 * MiB,
    ) -> ExecResult:
        """Runs ``argv`` in the sandbox's pod through the API server's exec
        subresource and returns its :class:`ExecResult` (exit code, stdout,
        stderr); a non-zero exit is a result, not an error.

        ``stdin`` (bytes or text) is the command's whole standard input;
        ``env`` adds environment variables; ``cwd`` is the working directory.
        These three need a POSIX ``sh`` and ``base64`` in the image (see
        :mod:`sandbox_client._exec` for why). More than ``max_output`` bytes
        on stdout or stderr raises :class:`LimitExceeded`; ``timeout``
        seconds without an exit raises :class:`ExecTimeout`; a refused exec
        raises :class:`Forbidden` (:class:`OwnerNotAuthorized` from the exec
        gate) with the server's message."""
        if isinstance(argv, str):
            raise TypeError("argv is a list of strings, e.g. ['sh', '-c', 'echo hi']")
        argv = [str(a) for a in argv]
        staged: Optional[str] = None
        stdin_arg = "-"
        if stdin is not None:
            data = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
            enc = base64.b64encode(data).decode()
            if len(enc) <= _exec.CHUNK:
                stdin_arg = "=" + enc
            else:
                staged = f"/tmp/.sbx-stdin-{secrets.token_hex(8)}"
                self._upload(staged, data, mode=None, make_dirs=False, timeout=timeout, final_dest=None)
                stdin_arg = "@" + staged
        return self._execute(_exec.run_argv(argv, stdin_arg, cwd, env), timeout, max_output)

    # ------------------------------------------------------------ files

    def _upload(self, tmp: str, data: bytes, *, mode: Optional[str], make_dirs: bool, timeout: Optional[float],
                final_dest: Optional[str]) -> None:
        pieces = _exec.chunks(data)
        dest = final_dest or tmp
        for i, piece in enumerate(pieces):
            first, final = i == 0, i == len(pieces) - 1
            r = self._execute(["sh", "-c", _exec.WRITE, "sh", tmp, base64.b64encode(piece).decode(),
                            "1" if first else "0", "1" if final and final_dest else "0", str(len(data)),
                            mode or "", dest, "1" if make_dirs else "0"], timeout, MiB)
            if r.exit_code != 0:
                raise FileError(f"writing {dest}: {r.stderr.strip() or f'exit code {r.exit_code}'}",
                                exit_code=r.exit_code, namespace=self.namespace, name=self.name)

    def write_file(
        self,
        path: str,
        data: Union[bytes, str],
        *,
        mode: Optional[Union[int, str]] = None,
        make_dirs: bool = False,
        max_size: int = 64 * MiB,
        timeout: Optional[float] = 120.0,
    ) -> None:
        """Writes ``data`` (bytes, or text as UTF-8) to ``path`` in the pod,
        relative to the container's working directory unless absolute.

        Binary safe: the bytes travel as base64 in pieces, land in a
        temporary file beside ``path``, are checked for their size and only
        then renamed over ``path``, so a reader never sees half a file.
        ``mode`` (``0o644`` or ``"644"``) is applied before the rename;
        ``make_dirs`` creates missing parent folders. More than ``max_size``
        bytes raises :class:`LimitExceeded`; a failure in the pod raises
        :class:`FileError` with its stderr."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        if len(raw) > max_size:
            raise LimitExceeded(f"{path}: {len(raw)} bytes is more than max_size {max_size}",
                                namespace=self.namespace, name=self.name)
        p = _exec.safe_path(path)
        m = None if mode is None else (format(mode, "o") if isinstance(mode, int) else str(mode))
        tmp = f"{p}.sbx-{secrets.token_hex(6)}.part"
        self._upload(tmp, raw, mode=m, make_dirs=make_dirs, timeout=timeout, final_dest=p)

    def read_file(self, path: str, *, max_size: int = 64 * MiB, timeout: Optional[float] = 120.0) -> bytes:
        """The bytes of the file at ``path`` in the pod (binary safe).
        A file larger than ``max_size`` raises :class:`LimitExceeded`; a
        missing or unreadable one :class:`FileError`."""
        p = _exec.safe_path(path)
        r = self._execute(["sh", "-c", _exec.READ, "sh", p, str(max_size + 1)], timeout,
                       _exec.base64_capacity(max_size + 1))
        if r.exit_code != 0:
            raise FileError(f"reading {path}: {r.stderr.strip() or f'exit code {r.exit_code}'}",
                            exit_code=r.exit_code, namespace=self.namespace, name=self.name)
        try:
            out = base64.b64decode(r.stdout_bytes, validate=False)
        except (binascii.Error, ValueError) as exc:
            raise FileError(f"reading {path}: undecodable transfer ({exc})", namespace=self.namespace,
                            name=self.name) from None
        if len(out) > max_size:
            raise LimitExceeded(f"{path}: larger than max_size {max_size}", namespace=self.namespace,
                                name=self.name)
        return out

    def read_text(self, path: str, *, encoding: str = "utf-8", **kw: Any) -> str:
        """:meth:`read_file` decoded as text."""
        return self.read_file(path, **kw).decode(encoding)

    def list_dir(self, path: str = ".", *, max_entries: int = 10000,
                 timeout: Optional[float] = 120.0) -> List[DirEntry]:
        """The entries of the folder at ``path`` in the pod (``.`` and
        ``..`` left out), sorted by name. More than ``max_entries`` raises
        :class:`LimitExceeded`; a missing folder :class:`FileError`."""
        p = _exec.safe_path(path)
        r = self._execute(["sh", "-c", _exec.LIST, "sh", p, str(max_entries)], timeout, 64 * MiB)
        if r.exit_code == 3:
            raise LimitExceeded(r.stderr.strip(), namespace=self.namespace, name=self.name)
        if r.exit_code != 0:
            raise FileError(f"listing {path}: {r.stderr.strip() or f'exit code {r.exit_code}'}",
                            exit_code=r.exit_code, namespace=self.namespace, name=self.name)
        entries = [DirEntry(name=n, type=t, size=s) for t, s, n in _exec.parse_listing(r.stdout_bytes)]
        return sorted(entries, key=lambda e: e.name)

    # -------------------------------------------------------- lifecycle

    def suspend(self, *, wait: bool = False, timeout: float = 120.0) -> "Sandbox":
        """Sets ``spec.lifecycle.suspend: true``: the pod is released (once no
        other Sandbox bound to it is active), the workspace stays. With
        ``wait``, waits for ``phase: Suspended``."""
        self._obj = self._api.patch(self.namespace, self.name, {"spec": {"lifecycle": {"suspend": True}}},
                                    uid=self.uid)
        if wait:
            d = Deadline(timeout, self._api.retry.clock)
            self._obj = self._api.wait(self.namespace, self.name, SUSPENDED, d, timeout, self._obj)
        return self

    def resume(self, *, wait: bool = True, timeout: float = 300.0) -> "Sandbox":
        """Sets ``spec.lifecycle.suspend: false``: the pod comes back under
        the same name with the same workspace. With ``wait`` (default),
        waits until it is Ready."""
        self._obj = self._api.patch(self.namespace, self.name, {"spec": {"lifecycle": {"suspend": False}}},
                                    uid=self.uid)
        if wait:
            d = Deadline(timeout, self._api.retry.clock)
            self._obj = self._api.wait(self.namespace, self.name, READY, d, timeout, self._obj)
        return self

    def extend(self, ttl: Optional[Duration] = None, *, until: Optional[dt.datetime] = None) -> "Sandbox":
        """Moves ``spec.lifecycle.shutdownTime`` to ``ttl`` from now (a
        ``timedelta``, seconds or ``"2h"``) or to ``until``; a time in the
        past expires the Sandbox at once."""
        if (ttl is None) == (until is None):
            raise ValueError("give exactly one of ttl and until")
        t = shutdown_time(ttl) if ttl is not None else rfc3339(until)  # type: ignore[arg-type]
        self._obj = self._api.patch(self.namespace, self.name, {"spec": {"lifecycle": {"shutdownTime": t}}},
                                    uid=self.uid)
        return self

    def delete(self, *, wait: bool = False, timeout: float = 120.0) -> bool:
        """Deletes the Sandbox (its pod goes once no other Sandbox holds it).
        Returns True when this call deleted it, False when it was already
        gone (or the name holds another Sandbox, left alone), however many
        answers are lost. With ``wait``, waits until the object is gone."""
        done = self._api.delete(self.namespace, self.name, timeout, uid=self.uid)
        if wait:
            self._api.wait_gone(self.namespace, self.name, self.uid, timeout)
        return done

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.delete()
        except NotFound:
            pass
