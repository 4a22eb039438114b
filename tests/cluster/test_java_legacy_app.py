"""The legacy application zkop exists for: a Java process reading its settings through Curator's ``CuratorCache``.

``zkop.interop.ConfigWatch`` (``tests/interop/java``; curator-recipes 5.9.0 from Maven Central) keeps one
``CuratorCache`` per znode that ``examples/`` declares and prints every event the caches deliver, with the
znode's data version. ``zkop run`` runs as its ServiceAccount on the real control plane; the examples are
applied server-side by ``kubectl`` into the test's namespace. The application sees:

- each znode created once, with the declared bytes (data version 0: created with its data, never created empty
  and filled in);
- each change zkop makes after a ZooKeeperConfig (``stringData``) or the ConfigMap behind ``dataFrom`` changes;
- zkop putting the declared value back after a hand edit, in one write;
- nothing else: the whole event sequence of every znode is asserted, and consecutive data versions show that
  zkop made no write the cache could have folded into a later one (``CuratorCache`` reads the data after each
  watch event, so two quick writes could reach it as one).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml
from cluster_support import kubectl
from kazoo.client import KazooClient
from zkop_testing.controlplane import REPO, ControlPlane
from zkop_testing.java_interop import JavaProgram
from zkop_testing.operator import OperatorProcess
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import MERGE_PATCH, KubeClient, resource_path

#: examples/acl.yaml's identity: zkop authenticates as it to manage that znode once its ACL is on.
OPS_CREDENTIALS = "ops:ops-password"


def examples(namespace: str) -> list[dict[str, Any]]:
    """The objects of ``examples/*.yaml``, moved into ``namespace``."""
    objects = [doc for path in sorted((REPO / "examples").glob("*.yaml"))
               for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
    return objects


def declared(obj: dict[str, Any], objects: list[dict[str, Any]]) -> str:
    """The value a ZooKeeperConfig declares (``data``, ``stringData`` or its ConfigMap's key), as text."""
    spec = obj["spec"]
    if "data" in spec:
        return base64.b64decode(spec["data"]).decode()
    if "stringData" in spec:
        return str(spec["stringData"])
    ref = spec["dataFrom"]["configMapKeyRef"]
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == ref["name"]]
    return str(config_map["data"][ref["key"]])


class Events:
    """Every event ``ConfigWatch`` printed so far, per path: ``(event, data, version)``."""

    def __init__(self, program: JavaProgram) -> None:
        self.program = program
        self.seen: dict[str, list[tuple[str, str | None, int]]] = {}

    def of(self, path: str) -> list[tuple[str, str | None, int]]:
        """The events of ``path`` so far."""
        for line in self.program.lines():
            self.seen.setdefault(line["path"], []).append((line["event"], line["data"], line["version"]))
        return self.seen.get(path, [])


def test_a_curator_cache_sees_every_change_zkop_makes_and_nothing_else(
        zkop_kubeconfig: str, plane: ControlPlane, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer,
        zk_base: str, chrooted: KazooClient, tmp_path: Path) -> None:
    ns = namespace
    objects = examples(ns)
    configs = {o["spec"]["path"]: o for o in objects if o["kind"] == "ZooKeeperConfig"}
    values = {path: declared(obj, objects) for path, obj in configs.items()}
    assert len(configs) == 5  # feature flag, routing rules (stringData, ACL), dataFrom, createOnly switch
    auth = tmp_path / "zk-credentials"
    auth.write_text(OPS_CREDENTIALS, encoding="utf-8")
    flag = "/app/features/new-recommendation-engine/enabled"
    rules, ranking = "/app/routing/checkout/rules", "/app/search/ranking"

    # The application runs before zkop has written anything: its caches start on absent znodes.
    with JavaProgram("ConfigWatch", [f"{zk_server.hosts}{zk_base}", *sorted(configs)]) as app, \
            OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}",
                            ["--workers", "2", "--namespace", ns, "--zk-auth-file", str(auth)]) as proc:
        events = Events(app)
        kubectl(plane, "apply", "--server-side", "--field-manager=flux", "-f", "-",
                input=yaml.safe_dump_all(objects))
        created = {path: [("NODE_CREATED", value, 0)] for path, value in values.items()}
        wait_for(lambda: {path: events.of(path) for path in configs} == created,
                 message="every znode created with its declared value")

        # A ZooKeeperConfig changes (as a commit applied by Flux would change it).
        new_rules = '{"canary": {"weight": 25, "header": "x-canary"}}\n'
        kube.request("PATCH", resource_path("platform.example.com", "v1alpha1", "zookeeperconfigs", ns,
                                            configs[rules]["metadata"]["name"]),
                     body={"spec": {"stringData": new_rules}}, content_type=MERGE_PATCH)
        wait_for(lambda: events.of(rules)[1:] == [("NODE_CHANGED", new_rules, 1)], message="the rules change")
        # The ConfigMap behind dataFrom changes.
        new_ranking = '{"boost": {"title": 3.0, "body": 1.0}, "minScore": 0.5}\n'
        ref = configs[ranking]["spec"]["dataFrom"]["configMapKeyRef"]
        kube.request("PATCH", resource_path("", "v1", "configmaps", ns, ref["name"]),
                     body={"data": {ref["key"]: new_ranking}}, content_type=MERGE_PATCH)
        wait_for(lambda: events.of(ranking)[1:] == [("NODE_CHANGED", new_ranking, 1)], message="the ranking change")

        # Someone edits the flag by hand (version 1); zkop puts the declared value back, in one write (version 2).
        # The cache may or may not deliver the hand edit itself: it reads the data after each watch event, and
        # zkop's correction can land before that read (then both events read version 2, and it reports one).
        chrooted.set(flag, b"false")
        undone = [("NODE_CHANGED", "true", 2)]
        wait_for(lambda: events.of(flag)[1:] in ([("NODE_CHANGED", "false", 1), *undone], undone),
                 message="zkop undoing the hand edit")

        expected: dict[str, list[tuple[str, str | None, int]]] = {
            path: [("NODE_CREATED", value, 0)] for path, value in values.items()}
        expected[rules].append(("NODE_CHANGED", new_rules, 1))
        expected[ranking].append(("NODE_CHANGED", new_ranking, 1))
        first = expected[flag][0]
        assert events.of(flag) in ([first, ("NODE_CHANGED", "false", 1), *undone], [first, *undone])
        expected[flag] = events.of(flag)
        assert {path: events.of(path) for path in configs} == expected
        assert set(events.seen) == set(configs)  # no event for any other znode
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
    assert app.returncode() == 0, app.stderr()
