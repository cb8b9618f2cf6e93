#!/usr/bin/env python3
"""The server's CPU per request: keep-alive GETs over N connections, and the server process's CPU time
(utime + stime from /proc) before and after, divided by the requests answered.

    Benchmarks/tools/request-floor.py --pid PID [--port 8080] [--connections 50] [--requests 20000]
        [--path /healthz] [--header "Authorization: Bearer TOKEN"]

The client's own cost does not enter the figure (it is the server's CPU that is counted), so a plain Python
client does. Keep --connections at or under the per-token limit (SYNC_MAX_CONCURRENT_PER_TOKEN, 64) for paths
that need a token. Linux only (/proc).
"""
import argparse
import os
import selectors
import socket
import time


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pid", type=int, required=True, help="the server's process id")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--path", default="/healthz")
    parser.add_argument("--header", action="append", default=[], help="an extra request header")
    args = parser.parse_args()

    headers = "".join(h.strip() + "\r\n" for h in args.header)
    request = f"GET {args.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n".encode()
    selector = selectors.DefaultSelector()
    sockets = []
    for _ in range(args.connections):
        s = socket.create_connection(("127.0.0.1", args.port))
        s.setblocking(False)
        selector.register(s, selectors.EVENT_READ, [b""])
        sockets.append(s)

    sent = done = 0
    statuses = {}
    cpu_before, start = cpu_seconds(args.pid), time.monotonic()
    for s in sockets[: args.requests]:
        s.send(request)
        sent += 1
    while done < args.requests:
        for key, _ in selector.select():
            data = key.fileobj.recv(65536)
            if not data:
                raise SystemExit("the server closed a connection")
            key.data[0] += data
            while True:
                buffer = key.data[0]
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    break
                head = buffer[:end].decode("latin-1").lower().split("\r\n")
                length = next((int(line.split(":")[1]) for line in head if line.startswith("content-length:")), 0)
                if len(buffer) < end + 4 + length:
                    break
                status = head[0].split(" ")[1]
                statuses[status] = statuses.get(status, 0) + 1
                key.data[0] = buffer[end + 4 + length :]
                done += 1
                if sent < args.requests:
                    key.fileobj.send(request)
                    sent += 1
    elapsed, cpu = time.monotonic() - start, cpu_seconds(args.pid) - cpu_before
    print(
        f"{done} requests in {elapsed:.2f} s ({done / elapsed:.0f}/s); server CPU {cpu:.2f} s = "
        f"{1e6 * cpu / done:.0f} µs per request; statuses {statuses}"
    )


if __name__ == "__main__":
    main()
