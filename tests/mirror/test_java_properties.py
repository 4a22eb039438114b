"""``zkop fetch --format properties`` read back by ``java.util.Properties`` (the real JDK class): keys and values
with spaces, ``=``, ``:``, ``#``, ``!``, backslashes, control characters and non-ASCII, through ``load(InputStream)``
(ISO-8859-1) and ``load(Reader)`` (UTF-8) alike."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kazoo.client import KazooClient
from zkop_testing.java_interop import java_classpath
from zkop_testing.waiting import EVENTUALLY
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.cmd.main import main

#: name below /app → value (a name is one znode; ``a b/c`` is two levels, the key ``a b.c``).
SPECIAL = {
    "plain": "value",
    "with space": "  leading and trailing spaces  ",
    "eq=colon:hash#bang!": "a=b:c#d!e",
    "back\\slash": "C:\\path\\to\\file \\u0041 not an escape",
    "#starts with hash": "!starts with bang",
    "!bang": "#hash",
    "ünïcödé-ключ-鍵": "grüße ✓ 𝄞 emoji 🎉",
    "controls": "tab\there\nnewline\rreturn\fformfeed",
    "empty": "",
    "nested/deeper key": "x = y",
    "trailing\\": "ends with backslash\\",
}


def test_properties_round_trip_through_java_util_properties(zk_server: ZooKeeperServer, zk_base: str,
                                                           zk: KazooClient, tmp_path: Path) -> None:
    for name, value in SPECIAL.items():
        zk.create(f"{zk_base}/app/{name}", value.encode("utf-8"), makepath=True)
    out = tmp_path / "app.properties"
    assert main(["fetch", "--zk-hosts", f"{zk_server.hosts}{zk_base}", "--path", "/app", "-r",
                 "--out", str(out), "--format", "properties"]) == 0
    out.read_bytes().decode("ascii")  # \uXXXX escapes: the file is ASCII
    loaded = subprocess.run(["java", "-XX:-UsePerfData", "-cp", java_classpath(), "zkop.interop.PropertiesLoad",
                             str(out)], capture_output=True, text=True, encoding="utf-8", timeout=EVENTUALLY)
    assert loaded.returncode == 0, loaded.stderr
    entries = json.loads(loaded.stdout)
    want = {name.replace("/", "."): value for name, value in SPECIAL.items()}
    assert entries["stream"] == want
    assert entries["reader"] == want
