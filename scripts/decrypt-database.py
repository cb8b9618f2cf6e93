#!/usr/bin/env python3
"""Decrypts a device database encrypted by SyncStorage (format 1), independently of the Swift code.

Usage: decrypt-database.py ENCRYPTED.sqlite KEYFILE PLAINTEXT.sqlite

KEYFILE is a FileKeyProvider file (`current <64 hex digits>`). The database must be checkpointed (no -wal
beside it: `sync-agent` checkpoints on exit). The format, as docs/ARCHITECTURE.md ("Encryption at rest")
describes it:

- pages of 4,096 bytes; SQLite leaves the last 40 of each free (header byte 20 = 40);
- bytes 0..15 of the file: the file's random salt (in place of "SQLite format 3\\0");
- the file's key: HKDF-SHA256(key, salt, info "sync-cipher page key 1"), 32 bytes;
- page n (from 1) at offset (n - 1) * 4096; its last 40 bytes: nonce (12), tag (16), counter (8), zero (4);
- ChaCha20-Poly1305 over bytes 16..4055 of page 1, 0..4055 of the others, with the additional data
  salt || "D" || n (8 bytes, big-endian) || 8 zero bytes || counter.
"""

import sys

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

PAGE, RESERVE, SALT = 4096, 40, 16


def main(source, key_file, target):
    key = None
    for line in open(key_file):
        name, value = line.split()
        if name == "current":
            key = bytes.fromhex(value)
    data = open(source, "rb").read()
    if len(data) % PAGE:
        sys.exit(f"{source}: {len(data)} bytes is not a whole number of 4,096-byte pages")
    salt = data[:SALT]
    file_key = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=b"sync-cipher page key 1").derive(key)
    cipher = ChaCha20Poly1305(file_key)
    out = bytearray()
    for index in range(len(data) // PAGE):
        number = index + 1
        page = data[index * PAGE:(index + 1) * PAGE]
        reserve = page[PAGE - RESERVE:]
        nonce, tag, counter = reserve[:12], reserve[12:28], reserve[28:36]
        start = SALT if number == 1 else 0
        aad = salt + b"D" + number.to_bytes(8, "big") + bytes(8) + counter
        try:
            plain = cipher.decrypt(nonce, page[start:PAGE - RESERVE] + tag, aad)
        except Exception:
            sys.exit(f"{source}: page {number} does not authenticate")
        out += (b"SQLite format 3\0" if number == 1 else b"") + plain + bytes(RESERVE)
    open(target, "wb").write(out)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
