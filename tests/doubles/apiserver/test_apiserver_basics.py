"""Server lifecycle, kubeconfig, command line, discovery and bootstrap objects."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes.client as k8s
import kubernetes.config
import pytest
from apiserver_helpers import api_error
from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_fixtures import zookeeperconfig_crd

from zkop.kube.client import KubeClient, load_api_client, resource_path

REPO = Path(__file__).resolve().parents[3]


def metadata(obj: k8s.V1Namespace) -> k8s.V1ObjectMeta:
    """``metadata`` of a typed object, asserting it is present."""
    assert obj.metadata is not None
    return obj.metadata


def test_context_manager_binds_a_free_port_and_releases_it() -> None:
    with ApiServer() as server:
        port = server.port
        assert server.url == f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"{server.url}/version", timeout=5) as resp:
            assert json.loads(resp.read())["major"] == "1"
    # stopped: the same port can be bound again
    with ApiServer(port) as again:
        assert again.port == port


def test_start_returns_self_and_stop_is_idempotent() -> None:
    server = ApiServer()
    assert server.start() is server
    server.stop()
    server.stop()
    with pytest.raises(RuntimeError):
        _ = server.url


def test_kubeconfig_works_with_the_official_loader(server: ApiServer, tmp_path: Path) -> None:
    path = server.write_kubeconfig(tmp_path / "sub" / "kubeconfig")
    configuration = k8s.Configuration()
    kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(path), client_configuration=configuration)
    assert configuration.host == server.url
    with k8s.ApiClient(configuration) as client:
        names = [metadata(n).name for n in k8s.CoreV1Api(client).list_namespace().items]
    assert {"default", "kube-system", "kube-public"} <= set(names)
    # zkop's own loader, through $KUBECONFIG-free explicit path
    kube = KubeClient(load_api_client(str(path)))
    assert kube.request("GET", "/api/v1/namespaces/default")["metadata"]["name"] == "default"
    kube.close()


def test_api_client_sends_the_bearer_token(server: ApiServer) -> None:
    client = server.api_client()
    headers: dict[str, str] = {}
    client.update_params_for_auth(headers, [], ["BearerToken"], "/api", "GET", None)
    assert headers["authorization"].startswith("Bearer ")
    client.close()


def test_command_line_serves_until_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc.yaml"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "zkop_testing.apiserver", "--port", "0", "--kubeconfig-out", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        kube = KubeClient(load_api_client(str(kubeconfig)))
        assert kube.request("GET", "/api/v1/namespaces/kube-system")["status"]["phase"] == "Active"
        kube.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_version_and_health(api: Any, server: ApiServer) -> None:
    info = k8s.VersionApi(api).get_code()
    assert info.major == "1" and info.git_version.startswith("v1.")
    for path in ("/healthz", "/readyz", "/livez"):
        with urllib.request.urlopen(server.url + path, timeout=5) as resp:
            assert resp.read() == b"ok"


def test_discovery_lists_groups_versions_and_resources(api: Any, kube: KubeClient) -> None:
    assert k8s.CoreApi(api).get_api_versions().versions == ["v1"]
    core = k8s.CoreV1Api(api).get_api_resources()
    names = {r.name for r in core.resources}
    assert {"namespaces", "services", "services/status", "configmaps", "secrets", "events", "endpoints"} <= names
    svc = next(r for r in core.resources if r.name == "services")
    assert svc.short_names is not None
    assert svc.namespaced and svc.kind == "Service" and "svc" in svc.short_names and "watch" in svc.verbs
    groups = {g.name: g for g in k8s.ApisApi(api).get_api_versions().groups}
    assert {"coordination.k8s.io", "discovery.k8s.io", "events.k8s.io", "apiextensions.k8s.io"} <= set(groups)
    assert "platform.example.com" not in groups
    kube.request("POST", resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
                 body=zookeeperconfig_crd())
    groups = {g.name: g for g in k8s.ApisApi(api).get_api_versions().groups}
    preferred = groups["platform.example.com"].preferred_version
    assert preferred is not None
    assert preferred.version == "v1alpha1"
    listing = kube.request("GET", "/apis/platform.example.com/v1alpha1")
    resources = {r["name"]: r for r in listing["resources"]}
    assert resources["zookeeperconfigs"]["shortNames"] == ["zkc"]
    assert resources["zookeeperconfigs"]["namespaced"] is True
    assert "zookeeperconfigs/status" in resources
    assert kube.request("GET", "/apis/platform.example.com")["preferredVersion"]["groupVersion"] == \
        "platform.example.com/v1alpha1"


def test_bootstrap_objects_exist(api: Any) -> None:
    core = k8s.CoreV1Api(api)
    ns = core.read_namespace("default")
    assert ns.status is not None
    assert ns.status.phase == "Active"
    labels = metadata(ns).labels
    assert labels is not None
    assert labels["kubernetes.io/metadata.name"] == "default"
    svc = core.read_namespaced_service("kubernetes", "default")
    assert svc.spec is not None
    assert svc.spec.cluster_ip == "10.96.0.1"


def test_unknown_paths_answer_a_not_found_status(kube: KubeClient) -> None:
    status, body = api_error(lambda: kube.request("GET", "/apis/nope.example.com/v1/things"))
    assert status == 404
    assert body["kind"] == "Status" and body["reason"] == "NotFound" and body["status"] == "Failure"
    assert body["message"] == "the server could not find the requested resource"
    status, body = api_error(lambda: kube.request("GET", "/api/v1/namespaces/default/configmaps/a/scale"))
    assert status == 404
    status, body = api_error(lambda: kube.request("GET", "/apis/platform.example.com"))
    assert status == 404


def test_method_not_allowed(kube: KubeClient) -> None:
    status, body = api_error(lambda: kube.request("POST", "/api/v1/namespaces/default/configmaps/x", body={}))
    assert status == 405 and body["reason"] == "MethodNotAllowed"
    status, _ = api_error(lambda: kube.request("POST", "/api/v1/configmaps", body={"metadata": {"name": "x"}}))
    assert status == 405
    status, _ = api_error(lambda: kube.request("DELETE", "/api/v1/namespaces"))
    assert status == 405


def test_malformed_json_body_is_a_bad_request(server: ApiServer) -> None:
    request = urllib.request.Request(f"{server.url}/api/v1/namespaces/default/configmaps", data=b"{not json",
                                     method="POST", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 400
    assert json.loads(info.value.read())["reason"] == "BadRequest"


def test_yaml_bodies_are_accepted(server: ApiServer, kube: KubeClient) -> None:
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  a: b\n"
    request = urllib.request.Request(f"{server.url}/api/v1/namespaces/default/configmaps", data=body,
                                     method="POST", headers={"Content-Type": "application/yaml"})
    with urllib.request.urlopen(request, timeout=5) as resp:
        assert resp.status == 201
    assert kube.request("GET", "/api/v1/namespaces/default/configmaps/from-yaml")["data"] == {"a": "b"}
