"""The offline parts: reading manifests, validation, the CRD schema, text detection, YAML, progress."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gitops_support import Cli, write_manifests, yaml_dump_all, zkc
from hypothesis import given, settings
from hypothesis import strategies as st

from zkop.gitops.encoding import as_text, data_fields
from zkop.gitops.export import manifest_object
from zkop.gitops.manifests import ManifestSourceError, dump_yaml, load_manifests
from zkop.gitops.progress import Progress
from zkop.gitops.schema import REPO_CRD_FILE, SchemaChecker, load_crd_schema
from zkop.gitops.validate import validate_manifests
from zkop.zkconfig.spec import parse_spec
from zkop.zookeeper.actions import OPEN_ACL

REPO = Path(__file__).resolve().parents[2]
CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}


def test_reads_multi_document_lists_directories_and_stdin(tmp_path: Path) -> None:
    (tmp_path / "dir" / "sub").mkdir(parents=True)
    (tmp_path / "dir" / ".git").mkdir()
    write_manifests(tmp_path / "dir" / "a.yaml", zkc("/a", "a", stringData="1"), CONFIGMAP)
    write_manifests(tmp_path / "dir" / "sub" / "b.yml", {
        "apiVersion": "v1", "kind": "List",
        "items": [zkc("/b", "b", stringData="2"), CONFIGMAP, zkc("/c", "c", stringData="3")]})
    write_manifests(tmp_path / "dir" / ".git" / "c.yaml", zkc("/hidden", "h", stringData="x"))
    (tmp_path / "dir" / "README.md").write_text("not a manifest")
    other_group = {**zkc("/d", "d", stringData="4"), "apiVersion": "other.example.com/v1"}
    stdin = io.StringIO(yaml_dump_all([zkc("/e", "e", stringData="5"), other_group]) + "---\n")

    found = load_manifests([str(tmp_path / "dir"), "-"], stdin=stdin)
    assert [m.obj["spec"]["path"] for m in found.objects] == ["/a", "/b", "/c", "/e"]
    assert (found.ignored, found.files, found.problems) == (3, 3, [])
    assert str(found.objects[2].location) == f"{tmp_path / 'dir' / 'sub' / 'b.yml'}:1 items[2]"
    assert str(found.objects[3].location) == "<stdin>:1"

    with pytest.raises(ManifestSourceError, match="no such file"):
        load_manifests([str(tmp_path / "missing.yaml")])
    with pytest.raises(ManifestSourceError, match="only once"):
        load_manifests(["-", "-"], stdin=io.StringIO(""))


def test_yaml_problems_carry_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: ConfigMap\n---\n- just\n- a list\n---\nkey: [unclosed\n")
    found = load_manifests([str(bad)])
    assert [(str(p.location), p.message.split(":")[0]) for p in found.problems] == [
        (f"{bad}:4", "document is a list, not an object"), (f"{bad}:8", "YAML syntax")]


def test_json_manifests_are_read_as_json(tmp_path: Path) -> None:
    """A JSON stream is decoded as JSON (apimachinery's YAMLOrJSONDecoder): ``json.dumps``' escaped surrogate pair
    is one character, which YAML's escapes cannot spell; flow-style YAML that is not JSON stays YAML."""
    stream = tmp_path / "stream.json"
    stream.write_text(json.dumps(zkc("/a\U0001f600", "a", stringData="1")) + "\n\n"
                      + json.dumps(zkc("/b", "b", stringData="2"), indent=1))
    flow = tmp_path / "flow.yaml"
    flow.write_text("{apiVersion: platform.example.com/v1alpha1, kind: ZooKeeperConfig, metadata: {name: c}, "
                    "spec: {path: /c, stringData: x}}\n")
    found = load_manifests([str(stream), str(flow)])
    assert found.problems == []
    assert [(m.obj["spec"]["path"], str(m.location)) for m in found.objects] == [
        ("/a\U0001f600", f"{stream}:1"), ("/b", f"{stream}:3"), ("/c", f"{flow}:1")]


def checker() -> SchemaChecker:
    return SchemaChecker(load_crd_schema())


def test_validation_reports_file_object_field_and_rule(tmp_path: Path) -> None:
    oversize = "x" * 101
    manifest = write_manifests(
        tmp_path / "m.yaml",
        zkc("/ok", "ok", stringData="fine"),
        zkc("/ok", "dup-path", stringData="again"),
        zkc("/bad-b64", "bad-b64", data="abc"),
        zkc("relative", "rel", stringData="x"),
        zkc("/big", "big", stringData=oversize),
        zkc("/both", "both", stringData="x", data="eA=="),
        zkc("/utf", "utf", data="/w=="),
        zkc("/ok2", "Bad_Name", stringData="x"),
        zkc("/acl", "acl", stringData="x", acl=[{"scheme": "digest", "id": "u:h", "permissions": ["fly"]}]),
        {**zkc("/v", "v", stringData="x"), "apiVersion": "platform.example.com/v2"},
        zkc("/ok3", "ok", stringData="dup name"),
        zkc("/typo", "typo", stringData="x", encodng="binary"),
        zkc("/from", "from", dataFrom={"secretKeyRef": {"name": "s", "key": "k"}}),
    )
    result = validate_manifests(load_manifests([str(manifest)]), checker(), max_data_bytes=100, strict=False)
    lines = [str(p) for p in result.problems]
    m = str(manifest)
    assert lines == [
        f"{m}:10: ZooKeeperConfig default/dup-path: spec.path: duplicate path /ok: also declared at {m}:1 "
        "(ZooKeeperConfig default/ok); one znode, one object",
        f"{m}:19: ZooKeeperConfig default/bad-b64: spec.data: is not valid base64 (RFC 4648, standard alphabet, "
        "padded)",
        f"{m}:28: ZooKeeperConfig default/rel: spec.path: path must be absolute (start with '/'): 'relative'",
        f"{m}:37: ZooKeeperConfig default/big: spec.stringData: decodes to 101 bytes, more than the limit of 100 bytes",
        f"{m}:46: ZooKeeperConfig default/both: spec: exactly one of spec.data, spec.stringData and spec.dataFrom "
        "must be set",
        f"{m}:56: ZooKeeperConfig default/utf: spec.data: is not valid UTF-8 at byte 0; set spec.encoding: binary "
        "for binary data",
        f"{m}:65: ZooKeeperConfig default/Bad_Name: metadata.name: must be a DNS-1123 subdomain: at most 253 "
        "characters, lowercase alphanumerics, '-' or '.', starting and ending alphanumeric",
        f"{m}:74: ZooKeeperConfig default/acl: spec.acl[0].permissions[0]: must be one of read, write, create, "
        "delete, admin, not 'fly'",
        f"{m}:88: ZooKeeperConfig default/v: apiVersion: must be platform.example.com/v1alpha1, not "
        "'platform.example.com/v2'",
        f"{m}:97: ZooKeeperConfig default/ok: metadata.name: duplicate ZooKeeperConfig default/ok: also defined at "
        f"{m}:1",
        f"warning: {m}:106: ZooKeeperConfig default/typo: spec.encodng: unknown field: not in the CRD schema "
        "(server-side apply, as Flux applies, and kubectl apply refuse it; kubectl --validate=false prunes it)",
    ]
    assert [c.path for c in result.objects] == ["/ok", "/typo", "/from"]
    from_secret = result.objects[2]
    assert from_secret.desired is None and from_secret.unresolved is not None and from_secret.unresolved.secret
    strict = validate_manifests(load_manifests([str(manifest)]), checker(), max_data_bytes=100)  # the default
    assert "/typo" not in [c.path for c in strict.objects]
    assert any(p.severity == "error" and p.field == "spec.encodng" for p in strict.problems)


def test_data_from_a_configmap_of_the_same_input_is_resolved(tmp_path: Path) -> None:
    """As in the cluster the input is applied to: the ConfigMap beside the ZooKeeperConfig (same
    namespace) gives the bytes, checked by the operator's rules; a key it lacks is an error; a
    Secret is never read offline, and a ConfigMap of another namespace is not this one."""
    def configmap(name: str, namespace: str, **data: str) -> dict[str, object]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                "data": data}

    manifest = write_manifests(
        tmp_path / "m.yaml",
        configmap("tuning", "default", ranking='{"boost": 2}'), configmap("other", "elsewhere", k="v"),
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"},
         "stringData": {"k": "hunter2"}},
        zkc("/ranking", "ranking", dataFrom={"configMapKeyRef": {"name": "tuning", "key": "ranking"}}),
        zkc("/nokey", "nokey", dataFrom={"configMapKeyRef": {"name": "tuning", "key": "absent"}}),
        zkc("/secret", "secret", dataFrom={"secretKeyRef": {"name": "s", "key": "k"}}),
        zkc("/other", "other", dataFrom={"configMapKeyRef": {"name": "other", "key": "k"}}),
    )
    result = validate_manifests(load_manifests([str(manifest)]), checker())
    by_path = {c.path: c for c in result.objects}
    ranking = by_path["/ranking"].desired
    assert ranking is not None and ranking.data == b'{"boost": 2}' and by_path["/ranking"].unresolved is None
    assert [(p.field, p.rule) for p in result.errors] == [
        ("spec.dataFrom", "ConfigMap 'tuning' of this input has no key 'absent' (or not strict base64)")]
    assert by_path["/secret"].desired is None and by_path["/secret"].unresolved is not None
    assert by_path["/other"].desired is None and by_path["/other"].unresolved is not None


def test_validate_command_exit_codes_and_json(cli: Cli, tmp_path: Path) -> None:
    good = write_manifests(tmp_path / "good.yaml", zkc("/a", "a", stringData="1"), CONFIGMAP)
    run = cli("validate", "-f", str(good))
    assert (run.code, run.out) == (0, "")
    assert "1 object checked: 1 valid, 0 error(s), 0 warning(s); 1 other object(s) ignored" in run.err
    bad = write_manifests(tmp_path / "bad.yaml", zkc("/zookeeper/x", "b", stringData="1"))
    run = cli("validate", "-f", str(good), str(bad), "--output", "json")
    assert run.code == 1
    assert run.json()["problems"] == [{
        "location": f"{bad}:1", "object": "ZooKeeperConfig default/b", "field": "spec.path",
        "rule": "paths under /zookeeper are reserved for the ZooKeeper server", "severity": "error"}]
    assert cli("validate", "-f", str(tmp_path / "nope")).code == 2
    assert cli("validate").code == 2  # -f is required (argparse usage error)


def test_validate_through_python_m_zkop_with_stdin(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    text = yaml_dump_all([zkc("/a", "a", data="not base64!")])
    done = subprocess.run([sys.executable, "-m", "zkop", "validate", "-f", "-"], input=text, capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stdout == "<stdin>:1: ZooKeeperConfig default/a: spec.data: does not match the pattern " \
                          "^[A-Za-z0-9+/]*={0,2}$\n"


def test_crd_schema_is_read_from_the_repository_and_defaults_apply(tmp_path: Path) -> None:
    schema = load_crd_schema()
    assert schema is load_crd_schema()  # cached
    assert REPO_CRD_FILE == REPO / "manifests" / "crd" / "zookeeperconfigs.yaml"
    assert load_crd_schema(str(REPO_CRD_FILE)) == schema
    defaulted = SchemaChecker(schema).with_defaults(zkc("/a", "a", stringData="x"))
    assert defaulted["spec"]["syncPolicy"] == "createOrUpdate" and defaulted["spec"]["encoding"] == "utf-8"
    not_a_crd = tmp_path / "crd.yaml"
    not_a_crd.write_text("kind: ConfigMap\n")
    with pytest.raises(ValueError, match="no version 'v1alpha1'"):
        load_crd_schema(str(not_a_crd))


def test_text_detection() -> None:
    assert as_text(b"") == ""
    assert as_text("Grüße\t🌍\r\n".encode()) == "Grüße\t🌍\r\n"
    for binary in (b"\xff", b"a\x00b", b"\x1b[31mred", "zero\u200bwidth".encode(), "\ufeffbom".encode(),
                   "rtl\u202eoverride".encode()):
        assert as_text(binary) is None, binary
    assert data_fields(b"\x00\x01") == {"data": "AAE=", "encoding": "binary"}
    assert data_fields(b"text") == {"stringData": "text"}


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64) | st.text(max_size=64).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_exported_spec_round_trips_through_yaml_and_parse_spec(data: bytes) -> None:
    obj = manifest_object("/p", data, OPEN_ACL)
    loaded = yaml.safe_load(dump_yaml(obj))
    assert loaded == obj
    assert parse_spec(loaded["spec"]).data == data


def test_progress_draws_only_after_a_delay_and_erases_itself() -> None:
    now = [0.0]
    stream = io.StringIO()
    with Progress("reading", total=4, enabled=True, stream=stream, clock=lambda: now[0]) as progress:
        progress.advance()
        assert stream.getvalue() == ""  # quick runs print nothing
        now[0] = 1.0
        progress.advance()
        assert stream.getvalue() == "\rreading [###############---------------]  50% 2/4\x1b[K"
        progress.advance()  # within the redraw interval
        assert stream.getvalue().count("\r") == 1
    assert stream.getvalue().endswith("\r\x1b[K")
    silent = io.StringIO()
    with Progress("reading", enabled=False, stream=silent, clock=lambda: 10.0) as progress:
        progress.advance(5)
    assert silent.getvalue() == "" and progress.render() == "reading 5"
