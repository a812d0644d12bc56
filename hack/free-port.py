#!/usr/bin/python3
"""Prints a loopback TCP port that is free now and was never given before.

usage: free-port.py [LEDGER]

The kernel hands the same ephemeral port to two binds in a row more often
than one would guess; two listeners given one port then either fail or, when
both ask for SO_REUSEPORT, split the connections between them (CI saw a
controller's probe and metrics listeners share a port that way). LEDGER, a
file of the ports given so far (one per line), is read and appended to under a
lock, so every caller sharing it gets a distinct port.
"""
import fcntl
import os
import socket
import sys


def pick(given):
    for _ in range(200):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in given:
            return port
    sys.exit("free-port.py: no new free port after 200 tries")


def main():
    if len(sys.argv) < 2:
        print(pick(set()))
        return
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "r+") as ledger:
        fcntl.flock(ledger, fcntl.LOCK_EX)
        ledger.seek(0)
        given = {int(line) for line in ledger if line.strip().isdigit()}
        port = pick(given)
        ledger.write(f"{port}\n")
    print(port)


if __name__ == "__main__":
    main()
