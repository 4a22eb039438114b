"""Write transactions of a scenario window, read from ZooKeeper's transaction log."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from zkop_testing.txnlog import Txn

from .measure import per
from .params import BRIDGE_ROOT, JSON, NOT_WRITES, PROBE_ROOT, REGISTRY_ROOT


@dataclass
class TxnWindow:
    result: JSON
    zxid_from: int
    zxid_to: int
    n: int
    chroot: str
    item: str = "cr"
    bench_session: int | None = None




ERROR_CODES = {"-101": "NoNode", "-103": "BadVersion", "-110": "NodeExists", "-111": "NotEmpty", "-102": "NoAuth"}


def txn_area(path: str, chroot: str) -> str:
    path = path.lstrip("'")  # TxnLogToolkit quotes the path of a delete
    inner = path[len(chroot):] if path.startswith(chroot) else path
    if inner == PROBE_ROOT.rsplit("/", 1)[0] or inner.startswith(PROBE_ROOT):
        return "startup_probe"
    if inner.startswith(REGISTRY_ROOT):
        return "ownership_registry"
    if inner.startswith(BRIDGE_ROOT):
        return "service_bridge"
    return "managed_znodes"


def txn_summary(txns: Sequence[Txn], n: int, chroot: str, bench_session: int | None = None) -> JSON:
    """Write transactions of a window (session transactions left out), by operation and area.

    ``bench_session``: the bench's own ZooKeeper session (drift edits); its writes are counted
    apart (``bench_writes``) and left out of everything else.
    """
    bench = [t for t in txns if bench_session is not None and t.session == bench_session]
    txns = [t for t in txns if bench_session is None or t.session != bench_session]
    writes = [t for t in txns if t.op not in NOT_WRITES]
    failed = Counter(ERROR_CODES.get(t.path, t.path) for t in txns if t.op == "error")
    areas = Counter(txn_area(t.path, chroot) for t in writes)
    excluding_probe = sum(v for k, v in areas.items() if k != "startup_probe")
    summary: JSON = {
        "zookeeper_writes": len(writes),
        "zookeeper_writes_excluding_startup_probe": excluding_probe,
        "zookeeper_writes_per_cr": per(len(writes), n),
        # A multi is one transaction (one zxid) however many znodes it writes.
        "zookeeper_write_transactions_per_cr": per(len({t.zxid for t in writes}), n),
        "zookeeper_writes_by_op": dict(sorted(Counter(t.op for t in writes).items())),
        "zookeeper_writes_by_area": dict(sorted(areas.items())),
        "zookeeper_failed_write_txns": sum(failed.values()),
        "zookeeper_failed_write_txns_by_error": dict(sorted(failed.items())),
    }
    if bench_session is not None:
        summary["bench_writes_excluded"] = sum(1 for t in bench if t.op not in NOT_WRITES)
    if 0 < len(writes) <= 10:
        summary["zookeeper_writes_list"] = [f"{t.op} {t.path.lstrip(chr(39))}" for t in writes]
    return summary
