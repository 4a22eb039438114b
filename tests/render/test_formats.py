"""zkop.render: the four formats, the sandboxed template and the atomic single-file write (pure, no ZooKeeper)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from zkop.render import Entry, RenderError, SandboxedTemplate, TemplateError, render, write_file_atomically

TREE = [Entry(("db", "url"), b"jdbc:pg://db?a=1&b=2"), Entry(("db", "pool-size"), b"10"),
        Entry(("greeting",), "grüße, ünïcode ✓ 𝄞".encode()), Entry(("flag",), b"yes")]


def test_properties_escapes_as_java_properties_store() -> None:
    entries = [Entry(("a key", "x=y:z#!"), b" leading and trailing \\ "), Entry(("tab",), b"a\tb\nc\rd\fe"),
               Entry(("uni",), "é𝄞".encode()), Entry(("empty",), b"")]
    text = render("properties", entries).decode("ascii")
    assert text.splitlines() == [
        "a\\ key.x\\=y\\:z\\#\\!=\\ leading and trailing \\\\ ",
        "empty=",
        "tab=a\\tb\\nc\\rd\\fe",
        "uni=\\u00E9\\uD834\\uDD1E",
    ]


def test_json_and_yaml_nest_by_path_segments_and_keep_values_text() -> None:
    want = {"db": {"pool-size": "10", "url": "jdbc:pg://db?a=1&b=2"}, "flag": "yes",
            "greeting": "grüße, ünïcode ✓ 𝄞"}
    assert json.loads(render("json", TREE)) == want
    assert yaml.safe_load(render("yaml", TREE)) == want  # "yes" and "10" stay strings


@pytest.mark.parametrize("form", ["json", "yaml"])
def test_a_znode_both_value_and_parent_is_a_clear_error(form: str) -> None:
    with pytest.raises(RenderError, match=r"znode a has data and znodes below it"):
        render(form, [Entry(("a",), b"1"), Entry(("a", "b"), b"2")])


@pytest.mark.parametrize("form", ["json", "yaml", "properties", "env"])
def test_data_that_is_not_utf8_is_a_clear_error(form: str) -> None:
    with pytest.raises(RenderError, match=r"znode blob: its data is not UTF-8"):
        render(form, [Entry(("ok",), b"1"), Entry(("blob",), b"\xff\xfe")])


def test_keys_two_znodes_map_to_are_a_clear_error() -> None:
    with pytest.raises(RenderError, match=r"a/b and a\.b both map to key 'a\.b'"):
        render("properties", [Entry(("a", "b"), b"1"), Entry(("a.b",), b"2")])
    with pytest.raises(RenderError, match=r"both map to key 'DB_URL'"):
        render("env", [Entry(("db", "url"), b"1"), Entry(("db-url",), b"2")])


def test_env_is_read_back_by_a_posix_shell_without_expansion(tmp_path: Path) -> None:
    nasty = "$(touch pwned) `touch pwned` $HOME 'quoted' \"dq\" \\ back\nnewline ünï"
    entries = [Entry(("db", "url"), b"jdbc:pg://db"), Entry(("nasty",), nasty.encode()),
               Entry(("1st",), b"one")]
    env_file = tmp_path / "app.env"
    env_file.write_bytes(render("env", entries))
    script = 'set -a; . "$1"; printf "%s\\0%s\\0%s" "$DB_URL" "$NASTY" "$_1ST"'
    out = subprocess.run(["sh", "-c", script, "sh", str(env_file)], cwd=tmp_path, capture_output=True, check=True)
    assert out.stdout.decode().split("\0") == ["jdbc:pg://db", nasty, "one"]
    assert not (tmp_path / "pwned").exists()


def test_template_renders_values_and_tree() -> None:
    template = SandboxedTemplate("url={{ tree.db.url }}\n{% for k, v in values|dictsort %}{{ k }}={{ v }}\n{% endfor %}"
                                 "root={{ root }}\n")
    text = template.render(TREE, "/app").decode()
    assert text.splitlines()[0] == "url=jdbc:pg://db?a=1&b=2"
    assert "db/pool-size=10" in text and text.endswith("root=/app\n")


@pytest.mark.parametrize("source", [
    "{{ ''.__class__.__mro__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ values.__class__ }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{% set x = values.update({'a': 1}) %}{{ x }}",
])
def test_a_template_cannot_escape_its_sandbox(source: str) -> None:
    with pytest.raises(RenderError) as err:
        SandboxedTemplate(source, "t.tmpl").render(TREE, "/app")
    assert "t.tmpl" in str(err.value) and "nothing is written" in str(err.value)


def test_a_znode_value_is_never_rendered_as_a_template() -> None:
    evil = Entry(("evil",), b"{{ ''.__class__.__mro__ }}{% for i in range(3) %}x{% endfor %}")
    assert SandboxedTemplate("{{ values.evil }}").render([evil], "/").decode() == evil.data.decode()


def test_an_undefined_name_is_an_error_and_a_bad_template_a_template_error() -> None:
    with pytest.raises(RenderError, match="UndefinedError"):
        SandboxedTemplate("{{ tree.missing.key }}").render(TREE, "/app")
    with pytest.raises(TemplateError, match="line 1"):
        SandboxedTemplate("{% for %}")


def test_atomic_file_write_replaces_whole_and_reports_no_change(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "app.properties"
    assert write_file_atomically(target, b"a=1\n")
    inode = target.stat().st_ino
    assert not write_file_atomically(target, b"a=1\n")
    assert target.stat().st_ino == inode
    assert write_file_atomically(target, b"a=2\n")
    assert target.read_bytes() == b"a=2\n" and target.stat().st_ino != inode  # a new file renamed over it
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)
    assert sorted(os.listdir(target.parent)) == ["app.properties"]  # no temporary file left


def test_atomic_file_write_that_fails_leaves_the_target_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "app.json"
    target.mkdir()
    (target / "keep").write_bytes(b"x")  # rename(2) cannot replace a non-empty directory
    with pytest.raises(OSError):
        write_file_atomically(target, b'{"a": 1}')
    assert os.listdir(tmp_path) == ["app.json"] and (target / "keep").read_bytes() == b"x"
