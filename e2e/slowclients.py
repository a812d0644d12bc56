#!/usr/bin/env python3
"""Holds N slow HTTP connections to HOST:PORT, each sending one header byte
every INTERVAL seconds and reconnecting when the server drops it (a
slowloris). Runs for DURATION seconds, then prints one line of figures:
"held_avg=... reconnects=... connect_failures=...". Raises its own
descriptor limit to fit N. Used by e2e/test_listeners.sh."""
import resource
import socket
import sys
import time


def main():
    host, port, n, duration, interval = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, n + 64) if hard != resource.RLIM_INFINITY else n + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    header = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4096
    socks = [None] * n
    sent = [0] * n
    reconnects = failures = 0
    samples = []

    def dial(i):
        nonlocal failures
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect_ex((host, port))
        except OSError:
            failures += 1
            s.close()
            return None
        sent[i] = 0
        return s

    for i in range(n):
        socks[i] = dial(i)
    end = time.time() + duration
    while time.time() < end:
        tick = time.time()
        held = 0
        for i in range(n):
            s = socks[i]
            ok = False
            if s is not None:
                try:
                    s.send(header[sent[i]:sent[i] + 1])
                    sent[i] = (sent[i] + 1) % len(header)
                    ok = True
                except BlockingIOError:
                    ok = True  # still connecting (queued behind the server's cap)
                except OSError:
                    pass
                if ok:
                    try:  # an answer or EOF means the server gave up on us
                        if s.recv(4096, socket.MSG_DONTWAIT) == b"":
                            ok = False
                        else:
                            ok = False
                    except BlockingIOError:
                        pass
                    except OSError:
                        ok = False
            if ok:
                held += 1
            else:
                if s is not None:
                    s.close()
                    reconnects += 1
                socks[i] = dial(i)
        samples.append(held)
        time.sleep(max(0.0, interval - (time.time() - tick)))
    for s in socks:
        if s is not None:
            s.close()
    avg = sum(samples) / len(samples) if samples else 0
    print("held_avg=%.0f reconnects=%d connect_failures=%d" % (avg, reconnects, failures), flush=True)


if __name__ == "__main__":
    main()
