"""ZooKeeper watch and request figures for ``cold_sync``, read from the server itself (issue #17).

``wchs`` (total watches) and ``wchc`` (watched paths per session) are ZooKeeper four-letter words
(``server/command/WatchCommand``, whitelisted by the test harness); requests per new object come
from zkop's own ``zkop_zookeeper_request_duration_seconds_count`` (every request it sends,
``add_watch`` included). ``watch_mode`` is what zkop was started with (``ZOOKEEPER_WATCH_MODE`` in
the environment; ``auto`` when unset).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from zkop_testing.zookeeper import ZooKeeperServer

from .params import JSON

__all__ = ["server_watches", "watch_figures"]


def server_watches(server: ZooKeeperServer) -> JSON:
    """``{"total": wchs total, "by_session": [watches of each session, most first]}``."""
    match = re.search(r"Total watches:\s*(\d+)", server.four_letter_word("wchs"))
    sessions: dict[str, int] = {}
    current = ""
    for line in server.four_letter_word("wchc").splitlines():
        if line.startswith("0x"):
            current = line.strip()
            sessions.setdefault(current, 0)
        elif line.strip() and current:
            sessions[current] += 1
    return {"total": int(match.group(1)) if match else None, "by_session": sorted(sessions.values(), reverse=True)}


def watch_figures(server: ZooKeeperServer, ops: Mapping[str, float], n: int) -> JSON:
    """The figures ``cold_sync`` adds: requests per new object and the server-side watches once settled."""
    watches = server_watches(server)
    return {
        "watch_mode": os.environ.get("ZOOKEEPER_WATCH_MODE", "auto"),
        "zookeeper_requests_per_new_object": round(sum(ops.values()) / max(n, 1), 3),
        "server_side_watches": watches["total"],
        "server_side_watches_by_session": watches["by_session"],
    }
