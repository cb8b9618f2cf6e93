#!/usr/bin/env python3
"""The storage floor of a bootstrap: how long SQLite itself takes to write the rows a device ends with.

    Benchmarks/tools/storage-floor.py DEVICE.sqlite [--tables events,notes,streams] [--batch 500]
        [--cache-mib 64] [--runs 3]

Copies the rows of the given tables of a device's file, in the order the device wrote them (rowid order),
into a fresh file with the same tables, indexes and triggers, in transactions of --batch rows of each table
(as a device applies a page: its events, its records and their streams' versions together), with the
device's settings (WAL, synchronous=NORMAL, a --cache-mib page cache). The rows go from an attached copy
with `INSERT … SELECT`, so no client code runs per row: what it prints is SQLite's own cost of holding those
rows, which a device that keeps them cannot beat, and it prints the median of --runs runs.

Compare it with `sync-bench bootstrap`'s plain-client time for the same log: when the floor alone is longer,
the device's ratio to the plain client is bounded by storage, not by its code.
"""
import argparse
import os
import sqlite3
import statistics
import tempfile
import time


def copy(source, tables, batch, cache_mib):
    folder = tempfile.mkdtemp(prefix="storage-floor-")
    path = os.path.join(folder, "floor.sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute(f"PRAGMA cache_size = -{cache_mib * 1024}")
    db.execute("ATTACH ? AS source", (source,))
    schema = db.execute(
        "SELECT type, name, tbl_name, sql FROM source.sqlite_master WHERE sql IS NOT NULL ORDER BY type = 'table' DESC"
    ).fetchall()
    # The tables first (all of them, so that triggers find theirs), then indexes and triggers of the copied ones.
    for kind, name, table, sql in schema:
        if kind == "table" and not name.startswith("sqlite_"):
            db.execute(sql)
    for kind, name, table, sql in schema:
        if kind in ("index", "trigger") and table in tables:
            db.execute(sql)
    counts = {table: db.execute(f"SELECT max(rowid) FROM source.{table}").fetchone()[0] or 0 for table in tables}
    rows = sum(db.execute(f"SELECT count(*) FROM source.{table}").fetchone()[0] for table in tables)
    started = time.monotonic()
    for low in range(0, max(counts.values()) + 1, batch):
        db.execute("BEGIN")
        for table in tables:
            db.execute(
                f"INSERT INTO main.{table} SELECT * FROM source.{table} WHERE rowid > ? AND rowid <= ?",
                (low, low + batch),
            )
        db.execute("COMMIT")
    seconds = time.monotonic() - started
    db.close()
    for name in os.listdir(folder):
        os.remove(os.path.join(folder, name))
    os.rmdir(folder)
    return seconds, rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("device", help="a device's SQLite file (closed)")
    parser.add_argument("--tables", default="events,notes,streams")
    parser.add_argument("--batch", type=int, default=500, help="rows of each table per transaction")
    parser.add_argument("--cache-mib", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    tables = args.tables.split(",")
    times = []
    rows = 0
    for _ in range(args.runs):
        seconds, rows = copy(args.device, tables, args.batch, args.cache_mib)
        times.append(seconds)
    print(
        f"storage floor: {rows:,} rows of {', '.join(tables)} in transactions of {args.batch} per table: "
        f"median {statistics.median(times):.2f} s of {args.runs} runs ({', '.join(f'{t:.2f}' for t in times)})"
    )


if __name__ == "__main__":
    main()
