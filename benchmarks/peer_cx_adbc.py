"""The ConnectorX + ADBC pipeline a data engineer would write next: the peers benchmark's peer.

    python peer_cx_adbc.py SOURCE_URL TARGET_URL TABLE

Reads the whole table with ConnectorX (two partitions on ``id``, as Arrow), then
writes it with the ADBC PostgreSQL driver's ``adbc_ingest`` (binary COPY) into the
target's existing table. The whole table is held in memory and the copy is at
least once: the six lines a user would write, no more. It runs in a virtualenv
of its own (``benchmarks/.peers-venv``, made by :func:`benchmarks.bench_peers.peers_python`),
so that sluice never depends on ADBC, and the peer's ConnectorX is its own (sluice's
MySQL reader is ConnectorX too, from ``sluice[mysql]``).
"""

from __future__ import annotations

import sys

import adbc_driver_postgresql.dbapi as adbc
import connectorx as cx


def main(source: str, target: str, table: str) -> int:
    frame = cx.read_sql(source, f"SELECT * FROM {table}", partition_on="id", partition_num=2,
                        return_type="arrow")  # fmt: skip
    with adbc.connect(target) as conn, conn.cursor() as cursor:
        cursor.adbc_ingest(table, frame, mode="append")
        conn.commit()
    print(f"cx_adbc: {frame.num_rows} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
