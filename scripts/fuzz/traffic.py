"""Traffic for the fuzzed server (scripts/fuzz-api.sh): events in the token's scopes, pushed as a device would.

`seed`: pushes COUNT events into each scope, then exits. `blobs`: opens an upload session in the first scope and
leaves it open, uploads and commits a small blob there, and prints the two sessions' ids and the blob's hash
(values for the blob routes, which the fuzzer could not guess). `tick`: pushes one event into each scope every
INTERVAL seconds until it is stopped. The seeded events give pulls, checksums and the live stream something
to read (hooks.py's cursors and checksum ranges stay at or below COUNT, so they are always below the heads);
the ticks end a long-poll or a quiet live stream within INTERVAL, as other devices' writes would, so that a
pull with `wait` up to 30 s does not spend the fuzzer's time budget waiting.

Every event is a valid, accepted one of its own stream (type fuzz.tick, not commutative, streamVersion 1). Ticks
come from two replicas in turn: a long-poll that leaves one replica's events out (`exclude`, which the fuzzer
may take from an answer's dots) is still ended by the other's.
"""

import hashlib
import json
import os
import sys
import time
import urllib.request

REPLICAS = ("5eedfacade0000000000000000000001", "5eedfacade0000000000000000000002")


def uuid7(milliseconds: int) -> str:
    value = (milliseconds & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= (int.from_bytes(os.urandom(2), "big") & 0xFFF) << 64
    value |= 0b10 << 62
    value |= int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


class Device:
    def __init__(self, base: str, token: str, scopes: list[str], replica: str) -> None:
        self.base = base
        self.token = token
        self.scopes = scopes
        self.replica = replica
        self.counter = 0
        self.last = 0

    def event(self, scope: str) -> dict:
        self.counter += 1
        now = max(int(time.time() * 1000), self.last)
        self.last = now
        return {
            "id": uuid7(now),
            "scope": scope,
            "stream": f"tick-{self.replica}-{self.counter}",
            "streamVersion": 1,
            "type": "fuzz.tick",
            "schemaVersion": 1,
            "hlc": f"{now:016x}:{self.counter & 0xFFFF:04x}:{self.replica[:16]}",
            "dot": {"replica": self.replica, "counter": self.counter},
            "payload": {"n": self.counter},
        }

    def push(self, events: list[dict]) -> None:
        body = json.dumps({"replica": self.replica, "events": events}).encode()
        request = urllib.request.Request(
            f"{self.base}/v1/push",
            data=body,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            results = json.load(response)["results"]
        refused = [result for result in results if result["status"] != "accepted"]
        if refused:
            raise RuntimeError(f"the server refused events: {refused[:3]}")


def call(base: str, token: str, method: str, path: str, body: bytes, headers: dict) -> dict:
    request = urllib.request.Request(
        f"{base}{path}", data=body, headers={"Authorization": f"Bearer {token}", **headers}, method=method
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def blobs(base: str, token: str, scope: str) -> None:
    json_type = {"Content-Type": "application/json"}
    pending = hashlib.sha256(b"never sent").hexdigest()
    session = {"scope": scope, "hash": pending, "size": 10, "type": "application/octet-stream"}
    opened = call(base, token, "POST", "/v1/uploads", json.dumps(session).encode(), json_type)
    data = b"fuzzed blob"
    digest = hashlib.sha256(data).hexdigest()
    session = {"scope": scope, "hash": digest, "size": len(data), "type": "text/plain"}
    committed = call(base, token, "POST", "/v1/uploads", json.dumps(session).encode(), json_type)
    upload = committed["upload"]
    chunk = {"Content-Type": "application/octet-stream", "X-Chunk-SHA256": digest}
    call(base, token, "PUT", f"/v1/uploads/{upload}/chunks/0", data, chunk)
    call(base, token, "POST", f"/v1/uploads/{upload}/commit", b"", {})
    print(opened["upload"], upload, digest)


def main() -> None:
    mode, base, token, scopes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
    if mode == "blobs":
        blobs(base, token, scopes[0])
        return
    devices = [Device(base, token, scopes, replica) for replica in REPLICAS]
    if mode == "seed":
        count = int(sys.argv[5])
        devices[0].push([devices[0].event(scope) for _ in range(count) for scope in scopes])
        return
    interval = float(sys.argv[5])
    # The first replica's ticks count on from the seeded events' dots: a replica's counter grows by one with
    # each event it makes.
    devices[0].counter = int(sys.argv[6]) * len(scopes)
    tick = 0
    while True:
        time.sleep(interval)
        device = devices[tick % len(devices)]
        tick += 1
        try:
            device.push([device.event(scope) for scope in scopes])
        except (OSError, RuntimeError) as error:
            # A request slot taken (429) or a slow moment: the next tick tries again.
            print(f"traffic: a tick failed: {error}", file=sys.stderr)


if __name__ == "__main__":
    main()
