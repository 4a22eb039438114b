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

from zkop_testing.zookeeper import find_zookeeper

__all__ = ["Txn", "read_txn_log"]

#: The toolkit's JVM: no ``/tmp/hsperfdata_<user>`` (``-XX:-UsePerfData``, as for the servers), a quick start.
_TOOLKIT_JVM_FLAGS = ("-XX:-UsePerfData", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")

_LINE = re.compile(r"session (0x[0-9a-f]+) cxid \S+ zxid (0x[0-9a-f]+) (\w+)(?: ([^,\s]*))?")
# A multi prints as ``multi <op>:<serialised record>;<op>:…``; every record but ``error`` starts with its path.
_MULTI_OP = re.compile(r"(?:^|;)(create|create2|createContainer|createTTL|delete|deleteContainer|setData|check|error):")


@dataclass(frozen=True)
class Txn:
    """One transaction: ``session`` id, ``zxid``, operation (``create``, ``setData``, ``delete``, …) and path.

    A ``multi`` becomes one entry per operation, all with the multi's zxid and ``multi=True``.
    """

    session: int
    zxid: int
    op: str
    path: str
    multi: bool = False


def _multi_ops(session: int, zxid: int, payload: str) -> list[Txn]:
    """The operations of one ``multi`` transaction; a failed multi (any ``error`` part) wrote nothing.

    ZooKeeper logs a failed multi with its parts turned into error records (``DataTree.processTxn``),
    so it becomes one ``error`` entry, like a failed single write.
    """
    ops: list[Txn] = []
    for match in _MULTI_OP.finditer(payload):
        op = match[1]
        if op == "error":
            return [Txn(session, zxid, "error", "multi", multi=True)]
        start = match.end()
        raw = payload[start:start + 4].encode("latin-1", "replace")
        length = int.from_bytes(raw, "big") if len(raw) == 4 else 0
        ops.append(Txn(session, zxid, op, payload[start + 4:start + 4 + length], multi=True))
    return ops


def read_txn_log(data_dir: Path) -> list[Txn]:
    """Every transaction in the ``version-2/log.*`` files under ``data_dir``, in zxid order.

    Raises:
        subprocess.CalledProcessError: the toolkit failed on a log file.
    """
    installation = find_zookeeper()
    txns: list[Txn] = []
    for log in sorted(Path(data_dir).rglob("log.*")):
        out = subprocess.run(
            [installation.java, *_TOOLKIT_JVM_FLAGS, "-cp", ":".join(installation.classpath),
             "org.apache.zookeeper.server.persistence.TxnLogToolkit", "-d", str(log)],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout
        # One record per transaction; a record may span lines (ACL lists, and a multi's binary
        # payload, where a length byte of 10 is a newline), so it runs up to the next record.
        records = list(_LINE.finditer(out))
        for record, following in zip(records, [*records[1:], None], strict=True):
            session, zxid, op = int(record[1], 16), int(record[2], 16), record[3]
            if op == "multi":
                end = following.start() if following is not None else len(out)
                txns.extend(_multi_ops(session, zxid, out[record.start(4) if record[4] is not None
                                                           else record.end():end]))
            else:
                txns.append(Txn(session, zxid, op, record[4] or ""))
    return sorted(dict.fromkeys(txns), key=lambda t: t.zxid)  # stable: a multi keeps its order
