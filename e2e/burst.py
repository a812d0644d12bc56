"""Posts N Sandboxes at once, each on its own connection, as a client-cert
user; prints one line per HTTP status ("201 97") and the first body of every
other status. Usage: burst.py SERVER CA CERT KEY NAMESPACE PREFIX N OWNER"""
import http.client
import json
import ssl
import sys
import threading
import urllib.parse
from collections import Counter

server, ca, cert, key, ns, prefix, n, owner = sys.argv[1:9]
n = int(n)
url = urllib.parse.urlsplit(server)
ctx = ssl.create_default_context(cafile=ca)
ctx.load_cert_chain(cert, key)
start = threading.Barrier(n)
codes = Counter()
first_body = {}
lock = threading.Lock()


def post(i):
    spec = {"image": "registry.local/agent:1.0", "idempotencyKey": f"{prefix}-{i}"}
    if owner != "-":
        spec["workspaceOwner"] = owner
    body = json.dumps({"apiVersion": "sandbox.dev/v1alpha1", "kind": "Sandbox",
                       "metadata": {"name": f"{prefix}-{i}", "namespace": ns}, "spec": spec})
    conn = http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=60)
    start.wait()
    try:
        conn.request("POST", f"/apis/sandbox.dev/v1alpha1/namespaces/{ns}/sandboxes", body,
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        code, text = str(r.status), r.read().decode(errors="replace")
    except Exception as e:  # a connection error is an outcome to count too
        code, text = "error", repr(e)
    finally:
        conn.close()
    with lock:
        codes[code] += 1
        first_body.setdefault(code, text[:300])


threads = [threading.Thread(target=post, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for code, count in sorted(codes.items()):
    print(code, count)
for code, text in sorted(first_body.items()):
    if code != "201":
        print(f"first {code}: {text}", file=sys.stderr)
