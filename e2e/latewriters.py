#!/usr/bin/env python3
"""Quick clients that are a little late: COUNT of them, one every GAP seconds,
each connects to HOST:PORT, waits DELAY seconds (a client descheduled on a
busy node), then asks GET PATH and reads the answer (5 s limit). Prints one
line of figures: "answered=... failed=... worst=...s", where answered counts
the 200s, then how each failure went ("closed unanswered", a status line, an
OSError's name). Used by e2e/test_listeners.sh."""
import collections
import socket
import sys
import threading
import time


def ask(host, port, path, delay):
    """(None when answered with 200, else how it failed; seconds taken) for
    one late client."""
    t0 = time.time()
    try:
        with socket.create_connection((host, port), timeout=5) as s:
            time.sleep(delay)
            s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode())
            with s.makefile("rb") as f:
                reply = f.read()  # to the server's close (Connection: close)
        if reply.startswith(b"HTTP/1.1 200 "):
            return None, time.time() - t0
        line = reply.split(b"\r\n", 1)[0].decode("latin-1")
        return line or "closed unanswered", time.time() - t0
    except OSError as e:
        return type(e).__name__, time.time() - t0


def main():
    host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    count, gap, delay = int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
    results = []
    lock = threading.Lock()

    def one():
        r = ask(host, port, path, delay)
        with lock:
            results.append(r)

    threads = []
    for _ in range(count):
        t = threading.Thread(target=one)
        t.start()
        threads.append(t)
        time.sleep(gap)
    for t in threads:
        t.join()
    how = collections.Counter(why for why, _ in results if why is not None)
    failed = sum(how.values())
    worst = max((d for _, d in results), default=0.0)
    print("answered=%d failed=%d worst=%.3fs%s" % (len(results) - failed, failed, worst,
          "".join(" (%s: %d)" % kv for kv in sorted(how.items()))), flush=True)


if __name__ == "__main__":
    main()
