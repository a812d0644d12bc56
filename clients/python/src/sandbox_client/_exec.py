"""Running a command in a sandbox pod through the API server's ``exec``
subresource, and the small POSIX shell programs that carry stdin, env, cwd
and files over it.

The stream is the official client's websocket (``kubernetes.stream``,
protocol ``v4.channel.k8s.io``), read frame by frame here so that output stays
bytes (the client's own reader decodes every frame as UTF-8). That protocol
cannot tell the command that stdin has ended, so input never travels on the
stdin channel: it goes as base64 in the command's arguments, in pieces of at
most :data:`CHUNK` characters (one argument must stay below Linux's 128 KiB),
and a shell program in the pod decodes it. ``run`` without ``stdin``, ``env``
and ``cwd`` needs nothing in the image but the command; with them, and for
the file methods, the image needs a POSIX ``sh`` with ``base64``, ``head``,
``wc``, ``mv`` (coreutils or busybox).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Mapping, Optional, Sequence, Tuple

from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException

from ._rest import describe, typed_error
from .errors import ExecError, ExecTimeout, LimitExceeded, SandboxError

# Base64 characters per argument: 96 KiB (72 KiB of data).
CHUNK = 96 * 1024
RAW_CHUNK = CHUNK // 4 * 3

STDOUT, STDERR, ERROR = 1, 2, 3


@dataclass(frozen=True)
class ExecResult:
    """What a command did: its exit code and its output as bytes;
    ``stdout``/``stderr`` are the same decoded as UTF-8 (invalid bytes
    replaced). Unpacks as ``exit_code, stdout, stderr``."""

    exit_code: int
    stdout_bytes: bytes
    stderr_bytes: bytes

    @property
    def stdout(self) -> str:
        """Standard output as text."""
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        """Standard error as text."""
        return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.exit_code == 0

    def __iter__(self) -> Iterator[Any]:
        return iter((self.exit_code, self.stdout, self.stderr))


class Frames:
    """An open exec stream: ``recv(timeout)`` gives ``(channel, data)`` or
    ``None`` once the server closed it; ``close()`` ends it."""

    def recv(self, timeout: float) -> Optional[Tuple[int, bytes]]:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


# A connector opens the stream for (namespace, pod, container, argv, timeout).
Connector = Callable[[str, str, str, Sequence[str], float], Frames]


class _WebSocketFrames(Frames):
    def __init__(self, ws: Any) -> None:
        self.ws = ws

    def recv(self, timeout: float) -> Optional[Tuple[int, bytes]]:
        import websocket  # the official client's dependency

        sock = self.ws.sock
        sock.settimeout(max(timeout, 0.001))
        while True:
            try:
                opcode, frame = sock.recv_data_frame(True)
            except websocket.WebSocketTimeoutException:
                raise TimeoutError() from None
            except (websocket.WebSocketConnectionClosedException, ConnectionError):
                return None
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                return None
            if opcode in (websocket.ABNF.OPCODE_BINARY, websocket.ABNF.OPCODE_TEXT):
                data = frame.data if isinstance(frame.data, bytes) else frame.data.encode()
                if data:
                    return data[0], data[1:]

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001 - closing a broken stream
            pass


_HANDSHAKE = re.compile(r"Handshake status (\d{3})")


def websocket_connector(api_client: ApiClient) -> Connector:
    """The real connector: the exec subresource over the official client's
    websocket. A refused handshake becomes a typed error with the server's
    own message (read by asking the same URL again without upgrading, which
    the API server answers with the refusal and never runs the command)."""
    from kubernetes.stream import stream

    core = CoreV1Api(api_client)

    def connect(namespace: str, pod: str, container: str, argv: Sequence[str], timeout: float) -> Frames:
        try:
            ws = stream(core.connect_get_namespaced_pod_exec, pod, namespace, command=list(argv),
                        container=container, stderr=True, stdin=False, stdout=True, tty=False,
                        _preload_content=False, _request_timeout=timeout)
        except ApiException as exc:
            m = _HANDSHAKE.search(str(exc.reason or ""))
            if not m:
                raise ExecError(f"cannot open an exec stream to pod {namespace}/{pod}: {describe(exc)}",
                                namespace=namespace) from None
            raise _refusal(api_client, namespace, pod, container, argv, int(m.group(1)), timeout) from None
        return _WebSocketFrames(ws)

    return connect


def _refusal(api_client: ApiClient, namespace: str, pod: str, container: str, argv: Sequence[str],
             status: int, timeout: float) -> BaseException:
    query: List[Tuple[str, str]] = [("command", a) for a in argv]
    query += [("container", container), ("stdout", "true"), ("stderr", "true")]
    found: BaseException = ApiException(status=status, reason=f"HTTP {status}")
    try:
        api_client.call_api(f"/api/v1/namespaces/{namespace}/pods/{pod}/exec", "POST", query_params=query,
                            header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
                            _preload_content=False, _return_http_data_only=True,
                            _request_timeout=(min(10.0, timeout), timeout))
    except ApiException as exc:
        if exc.status == status:
            found = exc
    except Exception:  # noqa: BLE001 - only the message was sought
        pass
    e = typed_error(found, namespace)
    if isinstance(e, SandboxError):
        e.message = f"exec into pod {namespace}/{pod} refused: {e.message}"
        e.args = (e.message,)
    return e


_EXIT_STATUS = re.compile(r"exit (?:status|code) (\d{1,3})\s*$")


def exit_code_of(status: bytes) -> int:
    """The exit code in the stream's final ``metav1.Status``.

    ``Success`` is 0; kubelet reports a non-zero exit as ``NonZeroExitCode``
    with an ``ExitCode`` cause (``metav1.StatusCause.Type``, which is
    ``"reason"`` on the wire) and a message ending in ``exit code N``.
    Runtimes that lose that cause and report the exit only in their message,
    ending in Go's ``exit status N`` (kwok's local exec does), give N too.
    Anything else is an :class:`ExecError` with the server's message: the
    command did not run to an exit code."""
    try:
        st = json.loads(status.decode("utf-8", "replace")) if status.strip() else None
    except ValueError:
        raise ExecError(f"undecodable exec status: {status[:200]!r}") from None
    if not isinstance(st, dict):
        raise ExecError("the exec stream ended without the command's status")
    if st.get("status") == "Success":
        return 0
    for c in ((st.get("details") or {}).get("causes") or []):
        if isinstance(c, dict) and "ExitCode" in (c.get("reason"), c.get("type")):
            try:
                return int(str(c.get("message")))
            except (TypeError, ValueError):
                break
    msg = str(st.get("message") or "")
    m = _EXIT_STATUS.search(msg)
    if m and st.get("reason") in ("InternalError", "NonZeroExitCode", None):
        return int(m.group(1))
    raise ExecError(f"the command could not be run: {msg or st}")


def execute(connector: Connector, namespace: str, pod: str, container: str, argv: Sequence[str],
            timeout: Optional[float], max_output: int,
            clock: Callable[[], float] = time.monotonic) -> ExecResult:
    """Runs ``argv`` and collects its output. More than ``max_output``
    bytes on stdout or stderr is :class:`LimitExceeded` (the stream is closed);
    no status before ``timeout`` is :class:`ExecTimeout`."""
    if not argv:
        raise ValueError("argv is empty")
    t = 3600.0 * 24 if timeout is None else float(timeout)
    end = clock() + t
    frames = connector(namespace, pod, container, argv, t)
    out, err, status = bytearray(), bytearray(), bytearray()
    try:
        while True:
            left = end - clock()
            if left <= 0:
                raise ExecTimeout(f"{argv[0]}: no exit after {t:g}s", namespace=namespace)
            try:
                got = frames.recv(left)
            except TimeoutError:
                raise ExecTimeout(f"{argv[0]}: no exit after {t:g}s", namespace=namespace) from None
            if got is None:
                break
            ch, data = got
            if ch == STDOUT:
                out += data
            elif ch == STDERR:
                err += data
            elif ch == ERROR:
                status += data
            if len(out) > max_output or len(err) > max_output:
                raise LimitExceeded(f"{argv[0]}: output larger than {max_output} bytes", namespace=namespace)
            if len(status) > 1 << 20:
                raise ExecError("exec status larger than 1 MiB", namespace=namespace)
    finally:
        frames.close()
    return ExecResult(exit_code_of(bytes(status)), bytes(out), bytes(err))


# ------------------------------------------------------ shell programs

# run with stdin/env/cwd: sh -c RUN sh STDIN CWD N NAME=VALUE... ARGV...
# STDIN is "-" (none), "@PATH" (a staged file, unlinked once open) or
# "=BASE64" (decoded into the command's stdin).
RUN = r'''d=$1 c=$2 n=$3; shift 3
while [ "$n" -gt 0 ]; do export "$1"; shift; n=$((n - 1)); done
case $d in
@*) exec <"${d#@}" || exit 126; rm -f "${d#@}" ;;
esac
if [ -n "$c" ]; then cd "$c" || exit 126; fi
case $d in
=*) printf %s "${d#=}" | base64 -d | "$@" ;;
*) exec "$@" ;;
esac'''

# sh -c WRITE sh TMP BASE64 FIRST FINAL SIZE MODE DEST MKDIRS
# Appends one piece to TMP (created with noclobber on the first); the last
# piece checks the size, sets the mode and renames TMP over DEST.
WRITE = r'''f=$1 d=$2 first=$3 final=$4 size=$5 mode=$6 dest=$7 mk=$8
fail() { rm -f "$f"; exit 1; }
if [ "$first" = 1 ]; then
  if [ "$mk" = 1 ]; then mkdir -p "$(dirname "$f")" || exit 1; fi
  (set -C; : >"$f") || exit 1
fi
printf %s "$d" | base64 -d >>"$f" || fail
if [ "$final" = 1 ]; then
  n=$(( $(wc -c <"$f") )) || fail
  if [ "$n" -ne "$size" ]; then echo "$dest: $n bytes written, $size sent" >&2; fail; fi
  if [ -n "$mode" ]; then chmod "$mode" "$f" || fail; fi
  mv -f "$f" "$dest" || fail
fi'''

# sh -c READ sh PATH LIMIT: at most LIMIT bytes of PATH, base64.
READ = r'''if [ ! -e "$1" ]; then echo "$1: no such file or directory" >&2; exit 2; fi
if [ ! -f "$1" ]; then echo "$1: not a regular file" >&2; exit 2; fi
if [ ! -r "$1" ]; then echo "$1: permission denied" >&2; exit 2; fi
head -c "$2" "$1" | base64'''

# sh -c LIST sh PATH MAX: TYPE NUL SIZE NUL NAME NUL per entry.
LIST = r'''cd "$1" || exit 2
n=0
for f in * .*; do
  case $f in .|..) continue ;; esac
  if [ ! -e "$f" ] && [ ! -L "$f" ]; then continue; fi
  n=$((n + 1))
  if [ "$n" -gt "$2" ]; then echo "$1: more than $2 entries" >&2; exit 3; fi
  s=0
  if [ -L "$f" ]; then t=symlink
  elif [ -d "$f" ]; then t=dir
  elif [ -f "$f" ]; then t=file; s=$(( $(wc -c <"$f") ))
  else t=other; fi
  printf '%s\000%s\000%s\000' "$t" "$s" "$f"
done'''


def run_argv(argv: Sequence[str], stdin_arg: str, cwd: Optional[str], env: Optional[Mapping[str, str]]) -> List[str]:
    """The command line that runs ``argv`` with stdin, cwd and env through
    :data:`RUN`; ``argv`` itself when none is needed."""
    if stdin_arg == "-" and cwd is None and not env:
        return list(argv)
    assigns = []
    for k, v in (env or {}).items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise ValueError(f"invalid environment variable name {k!r}")
        assigns.append(f"{k}={v}")
    return ["sh", "-c", RUN, "sh", stdin_arg, cwd or "", str(len(assigns)), *assigns, *argv]


def safe_path(path: str) -> str:
    """``path`` such that no command takes it for an option."""
    if not path:
        raise ValueError("empty path")
    if "\x00" in path:
        raise ValueError("a path cannot contain NUL")
    return "./" + path if path.startswith("-") else path


def chunks(data: bytes) -> List[bytes]:
    """``data`` in pieces of :data:`RAW_CHUNK` bytes (one empty piece for
    empty data), each a whole number of base64 groups."""
    if not data:
        return [b""]
    return [data[i:i + RAW_CHUNK] for i in range(0, len(data), RAW_CHUNK)]


def base64_capacity(n: int) -> int:
    """Most bytes ``base64`` prints for ``n`` bytes of input (76-column lines)."""
    enc = (n + 2) // 3 * 4
    return enc + enc // 76 + 2


def parse_listing(out: bytes) -> List[Tuple[str, int, str]]:
    """``(type, size, name)`` of each entry of a :data:`LIST` output."""
    parts = out.split(b"\x00")
    if parts and parts[-1] == b"":
        parts.pop()
    if len(parts) % 3:
        raise ExecError("malformed directory listing")
    entries = []
    for i in range(0, len(parts), 3):
        t, s, name = parts[i:i + 3]
        entries.append((t.decode(), int(s or b"0"), name.decode("utf-8", "surrogateescape")))
    return entries
