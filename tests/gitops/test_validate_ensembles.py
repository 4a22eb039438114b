"""``zkop validate`` knows ZooKeeperEnsembles: their schema and rules, and one path per ensemble."""

from __future__ import annotations

from pathlib import Path

from gitops_support import write_manifests, zkc

from zkop.gitops.manifests import load_manifests
from zkop.gitops.schema import SchemaChecker, load_crd_schema, load_ensemble_crd_schema
from zkop.gitops.validate import validate_manifests


def ensemble(name: str, **spec: object) -> dict[str, object]:
    return {"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperEnsemble", "metadata": {"name": name},
            "spec": spec}


def validate(path: Path) -> list[tuple[str, str, str]]:
    result = validate_manifests(load_manifests([str(path)]), SchemaChecker(load_crd_schema()))
    return [(p.object, p.field, p.rule) for p in result.errors]


def test_a_valid_ensemble_and_the_same_path_on_two_ensembles_pass(tmp_path: Path) -> None:
    manifest = write_manifests(
        tmp_path / "m.yaml",
        ensemble("prod-eu", connectString="zk-0.eu:2181,zk-1.eu:2181", chroot="/prod", sessionTimeout="10s",
                 watchMode="auto", auth={"digest": {"secretRef": {"name": "eu-auth", "key": "credentials"}}},
                 tls={"secretRef": {"name": "eu-tls"}}, adoption="IfRequested",
                 tenancy={"rules": [{"namespaces": ["team-a"], "pathPrefixes": ["/config/team-a"]}]}),
        zkc("/app/flag", "on-default", stringData="1"),
        zkc("/app/flag", "on-eu", stringData="2", ensembleRef={"name": "prod-eu"}),
    )
    assert validate(manifest) == []
    loaded = load_manifests([str(manifest)])
    assert (len(loaded.objects), len(loaded.ensembles), loaded.ignored) == (2, 1, 0)


def test_an_invalid_ensemble_and_a_path_declared_twice_on_one_ensemble_fail(tmp_path: Path) -> None:
    manifest = write_manifests(
        tmp_path / "m.yaml",
        ensemble("bad", connectString="zk:2181/chroot", sessionTimeout="soon",
                 auth={"sasl": {"mechanism": "DIGEST-MD5"}}, surprise=1),
        {**ensemble("namespaced", connectString="zk:2181"), "metadata": {"name": "namespaced", "namespace": "x"}},
        zkc("/app/flag", "a", stringData="1", ensembleRef={"name": "prod-eu"}),
        zkc("/app/flag", "b", stringData="2", ensembleRef={"name": "prod-eu"}),
    )
    errors = validate(manifest)
    fields = {(obj, field) for obj, field, _ in errors}
    assert ("ZooKeeperEnsemble bad", "spec.sessionTimeout") in fields
    assert ("ZooKeeperEnsemble bad", "spec.surprise") in fields
    assert any(obj == "ZooKeeperEnsemble bad" and "chroot" in rule for obj, _, rule in errors), errors
    assert ("ZooKeeperEnsemble x/namespaced", "metadata.namespace") in fields
    assert ("ZooKeeperConfig default/b", "spec.path") in fields
    assert load_ensemble_crd_schema()["properties"]["spec"]["required"] == ["connectString"]


def test_an_ensembles_tenancy_rules_are_checked_as_the_policy_file_is(tmp_path: Path) -> None:
    """The ensemble's ``spec.tenancy`` goes through the same parser as ``--tenancy-policy-file``
    (:meth:`zkop.feature.tenancy.TenancyPolicy.from_spec`): a rule that selects no namespace is named, below
    ``spec``."""
    manifest = write_manifests(
        tmp_path / "m.yaml",
        ensemble("nobody", connectString="zk:2181", tenancy={"rules": [{"pathPrefixes": ["/config"]}]}),
    )
    errors = validate(manifest)
    assert [(obj, field) for obj, field, _ in errors] == [("ZooKeeperEnsemble nobody", "spec.tenancy.rules[0]")], errors
