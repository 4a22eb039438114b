"""ZooKeeperConfigTrees end to end: ``zkop run --config-trees`` as zkop's ServiceAccount on a real control plane,
writing a real ZooKeeper server (checked with a plain kazoo client)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import javaproperties
import yaml
from kazoo.client import KazooClient
from zkop_testing.kstatus import compute
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import conditions, create, zkc
from zkop_testing.txnlog import read_txn_log
from zkop_testing.waiting import EVENTUALLY, wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import ApiException, KubeClient, resource_path
from zkop.ownership.registry import OwnerStamp

ZKT = ("platform.example.com", "v1alpha1", "zookeeperconfigtrees")
ZKC = ("platform.example.com", "v1alpha1", "zookeeperconfigs")


def tree(name: str, path: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfigTree",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"path": path, **spec}}


def tree_status(kube: KubeClient, name: str, namespace: str) -> dict[str, Any]:
    return dict(kube.request("GET", resource_path(*ZKT, namespace, name)).get("status") or {})


def properties(values: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


def put_config_map(kube: KubeClient, namespace: str, name: str, data: dict[str, str], *, create_it: bool) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}
    if create_it:
        kube.request("POST", resource_path("", "v1", "configmaps", namespace), body=body)
    else:
        kube.request("PUT", resource_path("", "v1", "configmaps", namespace, name), body=body)


def events(kube: KubeClient, name: str, namespace: str) -> dict[str, list[str]]:
    items = kube.request("GET", resource_path("", "v1", "events", namespace))["items"]
    found: dict[str, list[str]] = {}
    for e in items:
        if e["involvedObject"].get("name") == name:
            found.setdefault(e["reason"], []).append(e["message"])
    return found


def mzxids(zk: KazooClient, root: str) -> dict[str, int]:
    return {child: zk.get(f"{root}/{child}")[1].mzxid for child in zk.get_children(root)}


def zkop_cli(*args: str) -> Any:
    """``zkop ARGS -o json`` as a process (exit 0 expected); its JSON report."""
    run = subprocess.run([sys.executable, "-m", "zkop", *args, "-o", "json"], capture_output=True, text=True,
                         timeout=EVENTUALLY, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(run.stdout)


def replace_spec(kube: KubeClient, name: str, namespace: str, spec: dict[str, Any]) -> int:
    """Replace the tree's ``spec``; the new generation."""
    obj = kube.request("GET", resource_path(*ZKT, namespace, name))
    obj["spec"] = spec
    return int(kube.request("PUT", resource_path(*ZKT, namespace, name), body=obj)["metadata"]["generation"])


def observed(kube: KubeClient, name: str, namespace: str, generation: int) -> dict[str, Any] | None:
    """The tree's status once it reports ``generation``."""
    status = tree_status(kube, name, namespace)
    return status if status.get("observedGeneration") == generation else None


def test_a_tree_of_200_properties_converges_round_trips_through_export_and_each_change_is_one_transaction(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient, tmp_path: Path) -> None:
    ns = namespace
    values = {f"orders.setting{i:03d}": f"value-{i}" for i in range(200)}
    put_config_map(kube, ns, "orders", {"application.properties": properties(values)}, create_it=True)
    root = f"{zk_base}/config/orders"
    zk.create(f"{root}/handmade", b"not the tree's", makepath=True)  # a znode no object owns
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", ["--config-trees", "--namespace", ns]):
        kube.request("POST", resource_path(*ZKT, ns), body=tree(
            "orders", "/config/orders", ns,
            **{"from": [{"configMapRef": {"name": "orders"}, "key": "application.properties",
                         "format": "properties"}]}))
        wait_for(lambda: tree_status(kube, "orders", ns).get("synced") == 200, message="200 children synced")
        status = tree_status(kube, "orders", ns)
        assert (status["declared"], status["conflicted"], status["refused"], status["transactions"]) == (200, 0, 0, 1)
        assert zk.get(f"{root}/orders.setting042")[0] == b"value-42"
        stamp = OwnerStamp.from_bytes(zk.get(f"{zk_base}/zkop/owners/config/orders/orders.setting042")[0])
        assert stamp is not None
        assert (stamp.kind, stamp.namespace, stamp.name) == ("ZooKeeperConfigTree", ns, "orders")
        # The whole first generation was one multi: every child has the same mzxid.
        first = mzxids(zk, root)
        assert len({z for c, z in first.items() if c != "handmade"}) == 1

        # Round trip: `zkop export --tree` of the converged subtree declares every child's bytes ...
        hosts = f"{zk_server.hosts}{zk_base}"
        out = tmp_path / "export"
        report = zkop_cli("export", "--zk-hosts", hosts, "--tree", "/config/orders", "--exclude", "handmade",
                          "--namespace", ns, "-d", str(out))
        assert report["problems"] == [] and [e["path"] for e in report["exported"]] == ["/config/orders"]
        exported = yaml.safe_load((out / report["exported"][0]["file"]).read_text(encoding="utf-8"))
        assert exported["kind"] == "ZooKeeperConfigTree" and set(exported["spec"]) == {"path", "entries"}
        assert {e["path"]: e["stringData"] for e in exported["spec"]["entries"]} == values
        # ... `zkop sync` of it into an empty chroot gives byte-identical znodes, in one multi ...
        zk.ensure_path(f"{zk_base}/copy")
        synced = zkop_cli("sync", "--zk-hosts", f"{hosts}/copy", "-f", str(out))
        assert synced["summary"] == {"created": 200}
        copy = f"{zk_base}/copy/config/orders"
        assert {c: zk.get(f"{copy}/{c}")[0] for c in zk.get_children(copy)} == {
            c: zk.get(f"{root}/{c}")[0] for c in zk.get_children(root) if c != "handmade"}
        assert len({zk.exists(f"{copy}/{c}").czxid for c in zk.get_children(copy)}) == 1
        # ... and applied as the live object in place of the ConfigMap source, then back, it rewrites nothing.
        source = kube.request("GET", resource_path(*ZKT, ns, "orders"))["spec"]
        generation = replace_spec(kube, "orders", ns, {**exported["spec"]})
        status = wait_for(lambda: observed(kube, "orders", ns, generation), message="the exported spec reconciled")
        assert (status["declared"], status["synced"]) == (200, 200)
        generation = replace_spec(kube, "orders", ns, source)
        status = wait_for(lambda: observed(kube, "orders", ns, generation), message="the ConfigMap source again")
        assert (status["declared"], status["synced"]) == (200, 200)
        assert mzxids(zk, root) == first
        last_zxid = max(t.zxid for t in read_txn_log(zk_server.data_dir))

        # One line changes: exactly one znode is rewritten.
        values["orders.setting007"] = "changed"
        put_config_map(kube, ns, "orders", {"application.properties": properties(values)}, create_it=False)
        wait_for(lambda: zk.get(f"{root}/orders.setting007")[0] == b"changed", message="one property changed")
        after_one = mzxids(zk, root)
        assert sorted(c for c in after_one if after_one[c] != first[c]) == ["orders.setting007"]

        # Three lines change in one commit: one transaction (one mzxid), nothing else rewritten.
        for i in (10, 20, 30):
            values[f"orders.setting{i:03d}"] = f"v2-{i}"
        put_config_map(kube, ns, "orders", {"application.properties": properties(values)}, create_it=False)
        wait_for(lambda: zk.get(f"{root}/orders.setting030")[0] == b"v2-30", message="three properties changed")
        after_three = mzxids(zk, root)
        changed = {c: z for c, z in after_three.items() if z != after_one[c]}
        assert sorted(changed) == ["orders.setting010", "orders.setting020", "orders.setting030"]
        assert len(set(changed.values())) == 1
        # ZooKeeper's transaction log: the one-line change was one setData, the three-line one a single multi.
        writes = [(t.zxid, t.op, t.path[len(root) + 1:], t.multi) for t in read_txn_log(zk_server.data_dir)
                  if t.zxid > last_zxid and t.path.startswith(root + "/")]
        assert [w[1:3] for w in writes] == [("setData", "orders.setting007"), ("setData", "orders.setting010"),
                                            ("setData", "orders.setting020"), ("setData", "orders.setting030")]
        assert len({w[0] for w in writes[1:]}) == 1 and all(w[3] for w in writes[1:]) and writes[0][0] != writes[1][0]

        # A hand edit of one child is put back, announced once for the tree.
        zk.set(f"{root}/orders.setting100", b"hand edit")
        wait_for(lambda: zk.get(f"{root}/orders.setting100")[0] == b"value-100", message="drift corrected")
        wait_for(lambda: "DriftCorrected" in events(kube, "orders", ns), message="DriftCorrected Event")

        # A property leaves the spec: its znode and record are deleted; the unowned znode stays.
        del values["orders.setting199"]
        put_config_map(kube, ns, "orders", {"application.properties": properties(values)}, create_it=False)
        wait_for(lambda: zk.exists(f"{root}/orders.setting199") is None, message="pruned")
        assert zk.exists(f"{zk_base}/zkop/owners/config/orders/orders.setting199") is None
        assert zk.get(f"{root}/handmade")[0] == b"not the tree's"
        wait_for(lambda: tree_status(kube, "orders", ns).get("declared") == 199, message="status counts 199")

        # Deleting the tree deletes what it owns, never the unowned znode.
        kube.request("DELETE", resource_path(*ZKT, ns, "orders"))
        wait_for(lambda: zk.get_children(root) == ["handmade"], message="owned children deleted with the tree")


def test_a_tree_is_in_progress_for_kstatus_until_zkop_has_seen_it(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient) -> None:
    # Flux's `wait: true` (kstatus) must not count a tree Ready before zkop wrote it: the CRD defaults
    # status.observedGeneration to -1, which is never the object's generation.
    ns = namespace
    created = kube.request("POST", resource_path(*ZKT, ns), body=tree("early", "/config/early", ns, entries=[
        {"path": "flag", "stringData": "on"}]))
    assert created["status"] == {"observedGeneration": -1} and compute(created) == "InProgress"
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", ["--config-trees", "--namespace", ns]):
        wait_for(lambda: compute(kube.request("GET", resource_path(*ZKT, ns, "early"))) == "Current",
                 message="Current once zkop reports it")
        assert zk.get(f"{zk_base}/config/early/flag")[0] == b"on"


def test_a_tree_and_a_zookeeperconfig_declaring_one_path_resolve_oldest_wins_both_statuses_saying_so(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient) -> None:
    ns = namespace
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", ["--config-trees", "--namespace", ns]):
        # The ZooKeeperConfig is older: the tree leaves that one child alone.
        create(kube, zkc("flag", "/config/a/flag", b"from-config", namespace=ns))
        wait_for(lambda: zk.exists(f"{zk_base}/config/a/flag") is not None, message="the config wrote")
        kube.request("POST", resource_path(*ZKT, ns), body=tree("a", "/config/a", ns, entries=[
            {"path": "flag", "stringData": "from-tree"}, {"path": "other", "stringData": "x"}]))
        wait_for(lambda: tree_status(kube, "a", ns).get("conflicted") == 1, message="the tree reports the conflict")
        status = tree_status(kube, "a", ns)
        assert status["synced"] == 1
        assert status["problems"][0]["path"] == "/config/a/flag"
        assert f"ZooKeeperConfig {ns}/flag" in status["problems"][0]["message"]
        assert conditions({"status": status})["Ready"]["reason"] == "PathConflict"
        assert zk.get(f"{zk_base}/config/a/flag")[0] == b"from-config"

        # The tree is older: a ZooKeeperConfig created after it is refused, naming the tree.
        kube.request("POST", resource_path(*ZKT, ns), body=tree("b", "/config/b", ns, entries=[
            {"path": "flag", "stringData": "from-tree"}]))
        wait_for(lambda: tree_status(kube, "b", ns).get("synced") == 1, message="tree b synced")
        create(kube, zkc("late", "/config/b/flag", b"from-late-config", namespace=ns))

        def late_conflict() -> dict[str, Any] | None:
            ready = conditions(kube.request("GET", resource_path(*ZKC, ns, "late"))).get("Ready")
            return ready if ready and ready.get("reason") == "PathConflict" else None

        ready = wait_for(late_conflict, message="the late ZooKeeperConfig is told PathConflict")
        assert f"ZooKeeperConfigTree {ns}/b" in ready["message"]
        assert zk.get(f"{zk_base}/config/b/flag")[0] == b"from-tree"
        assert tree_status(kube, "b", ns).get("conflicted") == 0


def test_a_tenants_tree_cannot_write_the_registry_nor_reserved_roots_nor_escape_its_root(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient) -> None:
    ns = namespace
    with OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", ["--config-trees", "--namespace", ns]):
        create(kube, zkc("victim", "/victim/x", b"v", namespace=ns))
        wait_for(lambda: zk.exists(f"{zk_base}/zkop/owners/victim/x") is not None, message="victim claimed")
        before = zk.get(f"{zk_base}/zkop/owners/victim/x")
        # A tree at zkop's registry root reads and writes nothing.
        kube.request("POST", resource_path(*ZKT, ns), body=tree("registry", "/zkop/owners", ns, entries=[
            {"path": "victim/x", "stringData": "forged"}]))
        wait_for(lambda: conditions({"status": tree_status(kube, "registry", ns)}).get("Ready", {}).get("reason")
                 == "ReservedPath", message="ReservedPath")
        # A tree above it: the children inside reserved roots are refused one by one, the others written.
        kube.request("POST", resource_path(*ZKT, ns), body=tree("above", "/zkop", ns, entries=[
            {"path": "owners/victim/x", "stringData": "forged"}, {"path": "probe/x", "stringData": "p"},
            {"path": "fine", "stringData": "ok"}]))
        wait_for(lambda: tree_status(kube, "above", ns).get("refused") == 2, message="two children refused")
        assert {p["reason"] for p in tree_status(kube, "above", ns)["problems"]} == {"ReservedPath"}
        assert zk.get(f"{zk_base}/zkop/owners/victim/x") == before
        assert zk.get(f"{zk_base}/zkop/fine")[0] == b"ok"
        # A child outside the root is rejected at apply time by the CRD schema.
        def rejected(body: dict[str, Any]) -> int:
            return _status_of_post(kube, ns, body)
        assert rejected(tree("escape", "/config/e", ns, entries=[{"path": "../x", "stringData": "e"}])) == 422
        assert rejected(tree("absolute", "/config/e", ns, entries=[{"path": "/x", "stringData": "e"}])) == 422
        assert rejected(tree("empty", "/config/e", ns, entries=[{"path": "a//b", "stringData": "e"}])) == 422


def _status_of_post(kube: KubeClient, namespace: str, body: dict[str, Any]) -> int:
    try:
        kube.request("POST", resource_path(*ZKT, namespace), body=body)
    except ApiException as err:
        return int(err.status)
    return 201


#: The ``--exec`` hook below: appends what the application would read when told (ZKOP_DIGEST and the rendered file,
#: read whole) to the log named by its argument, one JSON line per run.
RECORDER = """
import json, os, sys
with open(os.environ["ZKOP_OUTPUT"], "rb") as f:
    content = f.read().decode("iso-8859-1")
with open(sys.argv[1], "a") as log:
    log.write(json.dumps({"digest": os.environ["ZKOP_DIGEST"], "content": content}) + "\\n")
"""

#: The three properties every commit changes together, each value naming the commit (see ``commit_values``).
TOGETHER = ("pricing.currency", "pricing.amount", "pricing.version")


def commit_values(n: int) -> dict[str, str]:
    """Commit ``n``'s values of :data:`TOGETHER`."""
    return {"pricing.currency": f"EUR-{n}", "pricing.amount": f"{n}.00", "pricing.version": f"v{n}"}


def commit_of(rendered: str) -> set[int]:
    """The commit numbers the three properties of one rendered ``.properties`` file come from (one if consistent)."""
    props = javaproperties.loads(rendered)
    return {int(props["pricing.currency"].removeprefix("EUR-")), int(props["pricing.amount"].removesuffix(".00")),
            int(props["pricing.version"].removeprefix("v"))}


def test_100_commits_each_changing_3_properties_are_one_transaction_each_and_fetch_never_renders_part_of_one(
        zkop_kubeconfig: str, kube: KubeClient, namespace: str, zk_server: ZooKeeperServer, zk_base: str,
        zk: KazooClient, tmp_path: Path) -> None:
    ns = namespace
    steady = {f"checkout.setting{i:02d}": f"steady-{i}" for i in range(20)}
    put_config_map(kube, ns, "checkout", {"application.properties": properties({**steady, **commit_values(0)})},
                   create_it=True)
    root = f"{zk_base}/config/checkout"
    hosts = f"{zk_server.hosts}{zk_base}"
    recorder = tmp_path / "recorder.py"
    recorder.write_text(RECORDER)
    log = tmp_path / "rendered.jsonl"
    out = tmp_path / "application.properties"

    def renders() -> list[dict[str, str]]:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    with OperatorProcess(zkop_kubeconfig, hosts, ["--config-trees", "--namespace", ns]):
        kube.request("POST", resource_path(*ZKT, ns), body=tree(
            "checkout", "/config/checkout", ns,
            **{"from": [{"configMapRef": {"name": "checkout"}, "key": "application.properties",
                         "format": "properties"}]}))
        wait_for(lambda: tree_status(kube, "checkout", ns).get("synced") == 23, message="23 children synced")
        start_zxid = max(t.zxid for t in read_txn_log(zk_server.data_dir))
        fetch = subprocess.Popen([sys.executable, "-m", "zkop", "fetch", "--zk-hosts", hosts, "--path",
                                  "/config/checkout", "-r", "--watch", "--out", str(out), "--format", "properties",
                                  "--exec", f"{sys.executable} {recorder} {log}", "--wait", "5ms:20ms",
                                  "--log-level", "warning"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: [commit_of(r["content"]) for r in renders()] == [{0}], message="the first render")
            for n in range(1, 101):
                put_config_map(kube, ns, "checkout",
                               {"application.properties": properties({**steady, **commit_values(n)})},
                               create_it=False)
                wait_for(lambda n=n: zk.get(f"{root}/pricing.version")[0] == f"v{n}".encode(),  # type: ignore[misc]
                         interval=0.01, message=f"commit {n} in ZooKeeper")
                stats = {p: zk.exists(f"{root}/{p}") for p in TOGETHER}
                assert {p: zk.get(f"{root}/{p}")[0].decode() for p in TOGETHER} == commit_values(n)
                assert len({s.mzxid for s in stats.values()}) == 1, f"commit {n} was not one transaction: {stats}"
            wait_for(lambda: renders() and commit_of(renders()[-1]["content"]) == {100},
                     message="the last commit rendered")
        finally:
            fetch.send_signal(signal.SIGTERM)
            output = fetch.communicate(timeout=EVENTUALLY)[0].decode()
        assert fetch.returncode == 0 and "Traceback" not in output, output
    records = renders()
    partial = [r["content"] for r in records if len(commit_of(r["content"])) != 1]
    assert not partial, f"{len(partial)} of {len(records)} renders mixed two commits: {partial[:2]}"
    assert all(javaproperties.loads(r["content"]).items() >= steady.items() for r in records)
    seen = [commit_of(r["content"]).pop() for r in records]
    assert seen == sorted(seen) and seen[-1] == 100  # in commit order; coalesced, never behind
    # ZooKeeper's transaction log: each commit is one multi of exactly its three setData, nothing else below the root.
    writes: dict[int, list[tuple[str, str, bool]]] = {}
    for t in read_txn_log(zk_server.data_dir):
        if t.zxid > start_zxid and t.path.startswith(root + "/"):
            writes.setdefault(t.zxid, []).append((t.op, t.path[len(root) + 1:], t.multi))
    assert len(writes) == 100
    assert all(sorted(ops) == [("setData", p, True) for p in sorted(TOGETHER)] for ops in writes.values())
    print(f"zkop fetch --watch: {len(records)} renders for 100 commits of 3 properties, none partial")
