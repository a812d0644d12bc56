"""``kubectl sandbox``: the kubectl plugin (installed as ``kubectl-sandbox``).

Reads like kubectl: ``-n``, ``--kubeconfig``, ``--context`` and ``-o json``
anywhere after ``sandbox``; one subcommand per verb, each with ``--help``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, TextIO, Tuple

from . import __version__
from ._duration import parse_duration, parse_rfc3339
from .client import Client
from .errors import (
    ExecTimeout,
    Expired,
    Forbidden,
    ForeignPodConflict,
    IdempotencyKeyConflict,
    IntentMismatch,
    LimitExceeded,
    NotFound,
    NotReady,
    QuotaExceeded,
    Rejected,
    SandboxError,
    SandboxFailed,
    WaitTimeout,
)
from .sandbox import Sandbox

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_FORBIDDEN = 5
EXIT_UNAVAILABLE = 6
EXIT_QUOTA = 7
EXIT_TIMEOUT = 124

EXIT_CODES = f"""exit codes:
  {EXIT_OK}    success ('exec': the command's own exit code instead)
  {EXIT_ERROR}    any other error (the API's message is printed)
  {EXIT_USAGE}    usage error
  {EXIT_NOT_FOUND}    no such Sandbox, or no such file for 'cp'
  {EXIT_CONFLICT}    conflict: the key is held by another spec, the name by another request,
       or a foreign pod holds the sandbox's pod name
  {EXIT_FORBIDDEN}    forbidden: RBAC, or the owner may not be used by you (create, exec)
  {EXIT_UNAVAILABLE}    the sandbox cannot run: rejected, expired, failed, suspended
  {EXIT_QUOTA}    a quota refused it: a SandboxQuota in Reject mode, or a ResourceQuota
  {EXIT_TIMEOUT}  timed out (--wait, exec --timeout)"""


def exit_code_for(err: SandboxError) -> int:
    """The plugin's exit code for an error (see ``EXIT_CODES``)."""
    if isinstance(err, (WaitTimeout, ExecTimeout)):
        return EXIT_TIMEOUT
    if isinstance(err, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(err, QuotaExceeded):  # a Forbidden too: the more specific first
        return EXIT_QUOTA
    if isinstance(err, Forbidden):
        return EXIT_FORBIDDEN
    if isinstance(err, (IdempotencyKeyConflict, IntentMismatch, ForeignPodConflict)):
        return EXIT_CONFLICT
    if isinstance(err, (Rejected, Expired, SandboxFailed, NotReady)):
        return EXIT_UNAVAILABLE
    return EXIT_ERROR


def _globals(parser: argparse.ArgumentParser, suppress: bool) -> None:
    d: Dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    g = parser.add_argument_group("global options")
    g.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig context's)", **d)
    g.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)", **d)
    g.add_argument("--context", help="kubeconfig context", **d)
    g.add_argument("-o", "--output", choices=["json", "name"], help="output format", **d)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``kubectl sandbox``."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(
        prog="kubectl sandbox", formatter_class=fmt,
        description="Create Sandboxes exactly once, run commands and copy files in them.",
        epilog=EXIT_CODES + "\n\nA command for the sandbox (create, exec) follows '--'.")
    p.add_argument("--version", action="version", version=f"kubectl-sandbox {__version__}")
    _globals(p, False)
    sub = p.add_subparsers(dest="verb", metavar="COMMAND")
    sub.required = True

    def cmd(name: str, help_: str, epilog: str = "") -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help_, description=help_, formatter_class=fmt,
                           epilog=(epilog + "\n\n" if epilog else "") + EXIT_CODES)
        _globals(c, True)
        return c

    c = cmd("create", "Create a Sandbox (exactly once for its key) and print it.",
            "examples:\n  kubectl sandbox create fix-42 --image registry.local/agent:1.0 --owner alice \\\n"
            "      --key task-42 --ttl 2h --wait -- sleep infinity\n\n"
            "Re-running the same create with the same --key prints the same Sandbox; without\n"
            "--key every run is a new request (a fresh key), so a NAME that exists is a conflict.")
    c.add_argument("name", metavar="NAME")
    c.add_argument("--image", required=True, help="container image")
    c.add_argument("--owner", help="workspace owner whose workspace is mounted")
    c.add_argument("--key", help="idempotency key (default: a fresh one)")
    c.add_argument("--ttl", help="shutdown after this long (90s, 15m, 2h, 1d): spec.lifecycle.shutdownTime")
    c.add_argument("--shutdown-policy", choices=["Retain", "Delete"], help="what happens at the shutdown time")
    c.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="environment (repeatable)")
    c.add_argument("--cpu", help="cpu requests = limits (default 2)")
    c.add_argument("--memory", help="memory requests = limits (default 4Gi)")
    c.add_argument("--runtime-class", help="RuntimeClass (one the operator allows)")
    c.add_argument("--wait", action="store_true", help="wait until the sandbox is Ready")
    c.add_argument("--timeout", default="5m", help="time for the whole create (default 5m)")

    c = cmd("get", "Print one Sandbox, or the namespace's Sandboxes.")
    c.add_argument("name", metavar="NAME", nargs="?")
    c.add_argument("--owner", help="only this workspace owner's")
    c.add_argument("--key", help="only those with this idempotency key")

    c = cmd("exec", "Run a command in a Sandbox's pod; exits with the command's exit code.",
            "example:\n  kubectl sandbox exec fix-42 -- sh -c 'make test'")
    c.add_argument("name", metavar="NAME")
    c.add_argument("-i", "--stdin", action="store_true", help="send this program's stdin to the command")
    c.add_argument("--cwd", help="working directory in the pod")
    c.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="environment (repeatable)")
    c.add_argument("--timeout", default="10m", help="give up after this long (default 10m)")

    c = cmd("cp", "Copy a file into a Sandbox (cp LOCAL NAME:PATH) or out of it (cp NAME:PATH LOCAL).",
            "LOCAL '-' is stdin or stdout. PATH is relative to the container's working directory\n"
            "unless absolute.")
    c.add_argument("src", metavar="SRC")
    c.add_argument("dst", metavar="DST")
    c.add_argument("--mode", help="file mode for a copy in, e.g. 755")
    c.add_argument("--max-size", default=str(64 << 20), help="largest file in bytes (default 64 MiB)")

    c = cmd("suspend", "Suspend a Sandbox: its pod goes, the workspace stays.")
    c.add_argument("name", metavar="NAME")
    c.add_argument("--wait", action="store_true", help="wait for phase Suspended")
    c.add_argument("--timeout", default="2m")

    c = cmd("resume", "Resume a suspended Sandbox: the same pod comes back.")
    c.add_argument("name", metavar="NAME")
    c.add_argument("--wait", action="store_true", help="wait until it is Ready")
    c.add_argument("--timeout", default="5m")

    c = cmd("wait", "Wait by watch until a Sandbox is Ready (or, with --for suspended, Suspended).",
            "A Sandbox that can never get there ends the wait at once with its exit code\n"
            "(rejected, expired: 6; another request's key: 4; owner not authorized: 5; quota: 7).")
    c.add_argument("name", metavar="NAME")
    c.add_argument("--for", dest="state", choices=["ready", "suspended"], default="ready",
                   help="the state to wait for (default ready)")
    c.add_argument("--timeout", default="5m")

    c = cmd("extend", "Move a Sandbox's shutdown time to --ttl from now.")
    c.add_argument("name", metavar="NAME")
    c.add_argument("--ttl", required=True, help="90s, 15m, 2h, 1d")

    c = cmd("delete", "Delete a Sandbox (its pod goes when no other Sandbox holds it).",
            "Exits 0 when this run deleted it, 3 when it was gone already (--ignore-not-found: 0).\n"
            "With --uid (the metadata.uid 'create -o json' printed) only that Sandbox is deleted:\n"
            "another one made under NAME since is left alone, and the exit code is 3.")
    c.add_argument("name", metavar="NAME")
    c.add_argument("--uid", help="only the Sandbox of this uid (a uid precondition)")
    c.add_argument("--wait", action="store_true", help="wait until it is gone")
    c.add_argument("--timeout", default="2m")
    c.add_argument("--ignore-not-found", action="store_true", help="exit 0 when it does not exist")
    return p


def _seconds(s: str) -> float:
    return parse_duration(s).total_seconds()


def _env(items: Sequence[str]) -> Dict[str, str]:
    out = {}
    for it in items:
        if "=" not in it:
            raise ValueError(f"--env {it!r}: expected NAME=VALUE")
        k, v = it.split("=", 1)
        out[k] = v
    return out


def _age(ts: Optional[str]) -> str:
    t = parse_rfc3339(ts)
    if not t:
        return "<unknown>"
    s = max(0, int((dt.datetime.now(dt.timezone.utc) - t).total_seconds()))
    if s < 120:
        return f"{s}s"
    if s < 120 * 60:
        return f"{s // 60}m"
    if s < 48 * 3600:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def _table(rows: List[Sandbox], out: TextIO) -> None:
    head = ["NAME", "PHASE", "POD", "KEY", "OWNER", "READY", "AGE"]
    data = [[s.name, s.phase or "", s.pod_name or "", s.key or "", s.owner or "",
             s.condition("Ready").get("status") or "", _age(s.raw["metadata"].get("creationTimestamp"))]
            for s in rows]
    widths = [max([len(h)] + [len(r[i]) for r in data]) for i, h in enumerate(head)]
    for r in [head] + data:
        out.write("   ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")


def _print(sb: Sandbox, args: argparse.Namespace, verb: str, out: TextIO) -> None:
    if args.output == "json":
        out.write(json.dumps(sb.raw, indent=2) + "\n")
    elif args.output == "name":
        out.write(f"sandbox.sandbox.dev/{sb.name}\n")
    else:
        out.write(f"sandbox.sandbox.dev/{sb.name} {verb}\n")


_REMOTE = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?):(.+)$")


def _split_remote(arg: str) -> Optional[Tuple[str, str]]:
    if arg.startswith(("/", ".", "~")):
        return None
    m = _REMOTE.match(arg)
    return (m.group(1), m.group(3)) if m else None


def run(argv: Sequence[str], *, stdin: Any = None, stdout: Any = None, stderr: Any = None,
        client_factory: Optional[Callable[[argparse.Namespace], Client]] = None) -> int:
    """Runs the plugin with ``argv`` (without the program name); returns
    its exit code. Streams and the client are injectable for tests."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    argv = list(argv)
    tail: List[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, tail = argv[:i], argv[i + 1:]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if tail and args.verb not in ("create", "exec"):
        stderr.write(f"error: '{args.verb}' takes no command after '--'\n")
        return EXIT_USAGE
    if args.verb == "exec" and not tail:
        stderr.write("error: exec needs a command: kubectl sandbox exec NAME -- CMD...\n")
        return EXIT_USAGE

    def client() -> Client:
        if client_factory:
            return client_factory(args)
        return Client(args.namespace, kubeconfig=args.kubeconfig, context=args.context)

    try:
        return _dispatch(args, tail, client, stdin, stdout, stderr)
    except SandboxError as e:
        stderr.write(f"error: {e.message}\n")
        return exit_code_for(e)
    except ValueError as e:
        stderr.write(f"error: {e}\n")
        return EXIT_USAGE
    except OSError as e:
        stderr.write(f"error: {e}\n")
        return EXIT_NOT_FOUND if isinstance(e, FileNotFoundError) else EXIT_ERROR


def _dispatch(args: argparse.Namespace, tail: List[str], client: Callable[[], Client], stdin: Any,
              stdout: Any, stderr: Any) -> int:
    v = args.verb
    if v == "create":
        res: Dict[str, str] = {}
        if args.cpu:
            res["cpu"] = args.cpu
        if args.memory:
            res["memory"] = args.memory
        if args.ttl:
            parse_duration(args.ttl)
        sb = client().create(args.image, tail or None, owner=args.owner, key=args.key,
                             env=_env(args.env) or None, resources=res or None,
                             runtime_class=args.runtime_class, shutdown_after=args.ttl,
                             shutdown_policy=args.shutdown_policy, name=args.name, wait=args.wait,
                             timeout=_seconds(args.timeout))
        _print(sb, args, "created", stdout)
        return EXIT_OK
    if v == "get":
        c = client()
        if args.name:
            sb = c.get(args.name)
            if args.output == "json":
                stdout.write(json.dumps(sb.raw, indent=2) + "\n")
            elif args.output == "name":
                stdout.write(f"sandbox.sandbox.dev/{sb.name}\n")
            else:
                _table([sb], stdout)
            return EXIT_OK
        items = c.list(owner=args.owner, key=args.key)
        if args.output == "json":
            stdout.write(json.dumps({"apiVersion": "v1", "kind": "List", "items": [s.raw for s in items]},
                                    indent=2) + "\n")
        elif args.output == "name":
            for s in items:
                stdout.write(f"sandbox.sandbox.dev/{s.name}\n")
        elif items:
            _table(items, stdout)
        else:
            stderr.write(f"No resources found in {c.namespace} namespace.\n")
        return EXIT_OK
    if v == "exec":
        data = None
        if args.stdin:
            data = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read()
        sb = client().get(args.name)
        r = sb.run(tail, stdin=data, env=_env(args.env) or None, cwd=args.cwd, timeout=_seconds(args.timeout))
        _write_bytes(stdout, r.stdout_bytes)
        _write_bytes(stderr, r.stderr_bytes)
        return r.exit_code
    if v == "cp":
        src, dst = _split_remote(args.src), _split_remote(args.dst)
        if bool(src) == bool(dst):
            stderr.write("error: one of SRC and DST is NAME:PATH, the other a local path\n")
            return EXIT_USAGE
        limit = int(args.max_size)
        if dst:
            if args.src == "-":
                data = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read().encode()
            else:
                with open(args.src, "rb") as f:
                    data = f.read(limit + 1)
            if len(data) > limit:
                raise LimitExceeded(f"{args.src}: larger than --max-size {limit}")
            client().get(dst[0]).write_file(dst[1], data, mode=args.mode, max_size=limit)
            return EXIT_OK
        assert src is not None
        data = client().get(src[0]).read_file(src[1], max_size=limit)
        if args.dst == "-":
            _write_bytes(stdout, data)
        else:
            with open(args.dst, "wb") as f:
                f.write(data)
        return EXIT_OK
    if v in ("suspend", "resume"):
        sb = client().get(args.name)
        if v == "suspend":
            sb.suspend(wait=args.wait, timeout=_seconds(args.timeout))
            _print(sb, args, "suspended", stdout)
        else:
            sb.resume(wait=args.wait, timeout=_seconds(args.timeout))
            _print(sb, args, "resumed", stdout)
        return EXIT_OK
    if v == "wait":
        sb = client().get(args.name)
        if args.state == "suspended":
            sb.wait_suspended(timeout=_seconds(args.timeout))
        else:
            sb.wait_ready(timeout=_seconds(args.timeout))
        if args.output:
            _print(sb, args, "", stdout)
        else:
            stdout.write(f"sandbox.sandbox.dev/{sb.name} condition met\n")
        return EXIT_OK
    if v == "extend":
        parse_duration(args.ttl)
        sb = client().get(args.name).extend(args.ttl)
        if args.output:
            _print(sb, args, "extended", stdout)
        else:
            stdout.write(f"sandbox.sandbox.dev/{sb.name} extended to "
                         f"{(sb.spec.get('lifecycle') or {}).get('shutdownTime')}\n")
        return EXIT_OK
    if v == "delete":
        c = client()
        try:
            sb = c.get(args.name)
            if args.uid and sb.uid != args.uid:
                raise NotFound(f"Sandbox {sb.namespace}/{sb.name} of uid {args.uid} is gone; "
                               f"the name holds another (uid {sb.uid}), left alone",
                               namespace=sb.namespace, name=sb.name)
            # The delete is guarded by the uid read (or given): False when
            # that Sandbox went between the read and the delete.
            if not sb.delete(wait=args.wait, timeout=_seconds(args.timeout)):
                raise NotFound(f"Sandbox {sb.namespace}/{sb.name} (uid {sb.uid}) was gone already",
                               namespace=sb.namespace, name=sb.name)
        except NotFound:
            if args.ignore_not_found:
                return EXIT_OK
            raise
        if args.output == "name":
            stdout.write(f"sandbox.sandbox.dev/{sb.name}\n")
        else:
            stdout.write(f"sandbox.sandbox.dev/{sb.name} deleted\n")
        return EXIT_OK
    raise ValueError(f"unknown command {v}")  # pragma: no cover - argparse prevents it


def _write_bytes(stream: Any, data: bytes) -> None:
    if hasattr(stream, "buffer"):
        stream.buffer.write(data)
        stream.buffer.flush()
    else:
        stream.write(data.decode("utf-8", "replace"))


def main() -> None:
    """Console entry point ``kubectl-sandbox``."""
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":  # pragma: no cover
    main()
