"""Read a ZooKeeper server's transaction log: the server-side record of every write and its session.

Uses ZooKeeper's own ``TxnLogToolkit`` (``org.apache.zookeeper.server.persistence``,
ZooKeeper Administrator's Guide, "Tools"), so tests can check who wrote what,
e.g. that two zkop replicas never wrote at the same time.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from zkop.testing.zookeeper import find_zookeeper

__all__ = ["Txn", "read_txn_log"]

_LINE = re.compile(r"session (0x[0-9a-f]+) cxid \S+ zxid (0x[0-9a-f]+) (\w+)(?: ([^,\s]*))?")


@dataclass(frozen=True)
class Txn:
    """One transaction: ``session`` id, ``zxid``, operation (``create``, ``setData``, ``delete``, …) and path."""

    session: int
    zxid: int
    op: str
    path: str


def read_txn_log(data_dir: Path) -> list[Txn]:
    """Every transaction in the ``version-2/log.*`` files under ``data_dir``, in zxid order.

    Raises:
        subprocess.CalledProcessError: the toolkit failed on a log file.
    """
    installation = find_zookeeper()
    txns: list[Txn] = []
    for log in sorted(Path(data_dir).rglob("log.*")):
        out = subprocess.run(
            [installation.java, "-cp", ":".join(installation.classpath),
             "org.apache.zookeeper.server.persistence.TxnLogToolkit", "-d", str(log)],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout
        for line in out.splitlines():
            match = _LINE.search(line)
            if match:
                txns.append(Txn(int(match[1], 16), int(match[2], 16), match[3], match[4] or ""))
    return sorted(set(txns), key=lambda t: t.zxid)
