#!/usr/bin/env python3
"""AdmissionReviews posted straight to a webhook port, the way someone who is
not the API server would post them (e2e/test_trust.sh).

  review.py mint PORT NS NAME OWNER USER [GROUP...]
      POSTs a Sandbox CREATE review claiming USER/GROUPs to /mutate-sandbox and
      prints the sandbox.dev/ annotations its patch would stamp (JSON), or
      "refused <code> <message>".
  review.py flood PORT N BYTES
      POSTs N crafted reviews of about BYTES each at once (JSON arrays of
      tiny numbers: the most nodes per byte) and prints each HTTP status, or
      "closed" when the connection was cut before an answer.
  review.py identity PORT N USER_BYTES GROUPS
      POSTs N Sandbox CREATE reviews for owner alice, one at a time, each
      with a USER_BYTES-long username and GROUPS groups; prints each HTTP
      status and the review's allowed/message.

--cert FILE --key FILE (before the verb) present a client certificate.
"""
import base64
import json
import socket
import ssl
import sys
import threading


def context(cert, key):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def post(ctx, port, path, body, timeout=30):
    """Returns (status, body text), or (None, reason) when no answer came."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
                s.sendall(head)
                view = memoryview(body)
                for i in range(0, len(body), 65536):
                    s.sendall(view[i:i + 65536])
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
    except (OSError, ssl.SSLError) as e:
        return None, type(e).__name__
    if not data:
        return None, "closed"
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[-1].decode("utf-8", "replace")


def review(ns, name, owner, user, groups, uid="e2e-1"):
    return {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid, "operation": "CREATE", "namespace": ns, "name": name,
            "kind": {"group": "sandbox.dev", "version": "v1alpha1", "kind": "Sandbox"},
            "resource": {"group": "sandbox.dev", "version": "v1alpha1", "resource": "sandboxes"},
            "userInfo": {"username": user, "groups": groups},
            "object": {"apiVersion": "sandbox.dev/v1alpha1", "kind": "Sandbox",
                       "metadata": {"name": name, "namespace": ns},
                       "spec": {"image": "registry.local/agent:1.0", "workspaceOwner": owner,
                                "resources": {"requests": {"cpu": "2", "memory": "4Gi"},
                                              "limits": {"cpu": "2", "memory": "4Gi"}}}},
        },
    }


def main(argv):
    cert = key = None
    while argv and argv[0].startswith("--"):
        if argv[0] == "--cert":
            cert = argv[1]
        elif argv[0] == "--key":
            key = argv[1]
        argv = argv[2:]
    ctx = context(cert, key)
    verb, port = argv[0], int(argv[1])
    if verb == "mint":
        ns, name, owner, user = argv[2:6]
        body = json.dumps(review(ns, name, owner, user, argv[6:])).encode()
        status, text = post(ctx, port, "/mutate-sandbox", body)
        if status != 200:
            print(f"refused {status} {text[:200]}")
            return 0
        resp = json.loads(text)["response"]
        if not resp.get("allowed") or "patch" not in resp:
            print(f"refused {resp.get('status', {}).get('code')} {resp.get('status', {}).get('message', '')[:200]}")
            return 0
        ann = {}
        for op in json.loads(base64.b64decode(resp["patch"])):
            if op["path"] == "/metadata/annotations":
                ann.update(op["value"])
            elif op["path"].startswith("/metadata/annotations/"):
                ann[op["path"].split("/", 3)[3].replace("~1", "/").replace("~0", "~")] = op["value"]
        print(json.dumps(ann))
    elif verb == "flood":
        n, size = int(argv[2]), int(argv[3])
        head = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x",' \
               b'"operation":"CREATE","kind":{"kind":"Sandbox"},"userInfo":{"username":"u"},"object":{"a":['
        body = head + b"0," * ((size - len(head)) // 2) + b"0]}}}"
        out = [None] * n

        def one(i):
            out[i] = post(ctx, port, "/mutate-sandbox", body, timeout=60)[0]
        ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print(" ".join("closed" if s is None else str(s) for s in out))
    elif verb == "identity":
        n, ubytes, ngroups = int(argv[2]), int(argv[3]), int(argv[4])
        for i in range(n):
            r = review("team-a", f"big-{i}", "alice", "u" * ubytes, [f"g{j}" for j in range(ngroups)], uid=f"id-{i}")
            status, text = post(ctx, port, "/mutate-sandbox", json.dumps(r).encode())
            msg = ""
            if status == 200:
                resp = json.loads(text)["response"]
                msg = f"{resp.get('allowed')} {resp.get('status', {}).get('message', '')[:160]}"
            print(f"{status} {msg}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
