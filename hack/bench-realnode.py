"""The meter behind hack/bench-realnode.sh: one sandbox at a time on the real
node, through the API server, timed from the create to Ready and to the
first command's output (``true`` run through the API server's exec).

    bench-realnode.py ours NAMESPACE COUNT PREFIX IMAGE CMD_JSON RESOURCES_JSON OWNER
        our Sandboxes, with the Python client: create(..., wait=True), then
        run(["true"]); binding (Created, Warm) per sample
    bench-realnode.py claim NAMESPACE COUNT PREFIX POOL
        agent-sandbox's SandboxClaim on the SandboxWarmPool POOL: POST, watch
        until the claim is Ready, then ``true`` in its pod through the same
        exec code path (sandbox_client._exec) as ours

Prints one line per sample, ``sample <ms to Ready> <ms to output> <binding>``,
then ``summary`` lines (KEY=VALUE) for the shell to format. Credentials come
from $KUBECONFIG.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from kubernetes import client as k8s, config as k8s_config, watch as k8s_watch

import sandbox_client as sbx
from sandbox_client import _exec

CLAIMS = ("extensions.agents.x-k8s.io", "v1beta1", "sandboxclaims")
PEER_SANDBOXES = ("agents.x-k8s.io", "v1beta1", "sandboxes")


def ms(a: float, b: float) -> float:
    return (b - a) * 1000.0


def ours(ns: str, count: int, prefix: str, image: str, cmd: list, resources: dict, owner: str) -> list:
    c = sbx.Client(namespace=ns)
    out = []
    for i in range(count):
        t0 = time.monotonic()
        sb = c.create(image, cmd, owner=owner, resources=resources, name=f"{prefix}-{i}", timeout=300)
        t1 = time.monotonic()
        r = sb.run(["true"], timeout=60)
        t2 = time.monotonic()
        if r.exit_code != 0:
            raise SystemExit(f"{sb.name}: true exited {r.exit_code}")
        out.append((ms(t0, t1), ms(t0, t2), sb.refresh().status.get("binding", "?")))
        print("sample %.0f %.0f %s" % out[-1], flush=True)
    return out


def claim_ready(obj: dict) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            return True
    return False


def claims(ns: str, count: int, prefix: str, pool: str) -> list:
    k8s_config.load_kube_config()
    api = k8s.ApiClient()
    co = k8s.CustomObjectsApi(api)
    connect = _exec.websocket_connector(api)
    out = []
    for i in range(count):
        name = f"{prefix}-{i}"
        body = {"apiVersion": "/".join(CLAIMS[:2]), "kind": "SandboxClaim",
                "metadata": {"name": name, "namespace": ns}, "spec": {"warmPoolRef": {"name": pool}}}
        t0 = time.monotonic()
        created = co.create_namespaced_custom_object(*CLAIMS[:2], ns, CLAIMS[2], body)
        obj = created
        if not claim_ready(obj):
            w = k8s_watch.Watch()
            for ev in w.stream(co.list_namespaced_custom_object, *CLAIMS[:2], ns, CLAIMS[2],
                               field_selector=f"metadata.name={name}", timeout_seconds=300):
                obj = ev["object"]
                if claim_ready(obj):
                    w.stop()
                    break
        t1 = time.monotonic()
        if not claim_ready(obj):
            raise SystemExit(f"claim {name} not Ready in 300 s: {json.dumps(obj.get('status'))}")
        sname = obj["status"]["sandbox"]["name"]
        sandbox = co.get_namespaced_custom_object(*PEER_SANDBOXES[:2], ns, PEER_SANDBOXES[2], sname)
        pod = (sandbox["metadata"].get("annotations") or {}).get("agents.x-k8s.io/pod-name", sname)
        r = _exec.execute(connect, ns, pod, "sandbox", ["true"], 60, 1 << 20)
        t2 = time.monotonic()
        if r.exit_code != 0:
            raise SystemExit(f"{pod}: true exited {r.exit_code}")
        warm = "Warm" if "agents.x-k8s.io/pod-name" in (sandbox["metadata"].get("annotations") or {}) else "Cold"
        out.append((ms(t0, t1), ms(t0, t2), warm))
        print("sample %.0f %.0f %s" % out[-1], flush=True)
    return out


def summary(samples: list) -> None:
    for k, idx in (("ready", 0), ("first", 1)):
        v = sorted(s[idx] for s in samples)
        print(f"{k}_p50_ms={statistics.median(v):.0f}")
        print(f"{k}_max_ms={v[-1]:.0f}")
        print(f"{k}_min_ms={v[0]:.0f}")
    print("bindings=" + ",".join(sorted({s[2] for s in samples})))
    print(f"warm={sum(1 for s in samples if s[2] == 'Warm')}")


def main(argv: list) -> None:
    mode, ns, count, prefix = argv[1], argv[2], int(argv[3]), argv[4]
    if mode == "ours":
        image, cmd, resources, owner = argv[5], json.loads(argv[6]), json.loads(argv[7]), argv[8]
        s = ours(ns, count, prefix, image, cmd, resources, owner)
    elif mode == "claim":
        s = claims(ns, count, prefix, argv[5])
    else:
        raise SystemExit(f"unknown mode {mode}")
    summary(s)


if __name__ == "__main__":
    main(sys.argv)
