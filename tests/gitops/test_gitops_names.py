"""Object names and export file paths derived from znode paths."""

from __future__ import annotations

from pathlib import PurePosixPath

from hypothesis import given, settings
from hypothesis import strategies as st

from zkop.gitops.names import is_dns1123_label, is_dns1123_subdomain, manifest_file, object_name
from zkop.zookeeper.paths import InvalidPath, validate_path

# Segments ZooKeeper accepts: no '/', no forbidden code points, not '.' or '..'.
_segment_chars = st.characters(codec="utf-8", exclude_characters="/",
                               exclude_categories=("Cc", "Cs", "Co"), max_codepoint=0xFFEF)
_segments = st.text(_segment_chars, min_size=1, max_size=12).filter(lambda s: s not in (".", ".."))
_plain = st.from_regex(r"[a-z0-9]{1,5}(-[a-z0-9]{1,5}){0,2}", fullmatch=True)


def _valid(path: str) -> bool:
    try:
        validate_path(path)
    except InvalidPath:
        return False
    return True


paths = st.lists(st.one_of(_segments, _plain), min_size=1, max_size=6).map(lambda s: "/" + "/".join(s)).filter(_valid)


def test_plain_paths_map_to_dotted_names() -> None:
    assert object_name("/app/features/new-engine/enabled") == "app.features.new-engine.enabled"
    assert object_name("/a") == "a"


def test_other_paths_get_a_stable_digest_suffix() -> None:
    # Pinned: changing the rule would rename every exported object.
    # The suffix is sha256(path)[:10]: sha256("/App/Some.Dotted.Name") starts with c68f55c12b.
    assert object_name("/App/Some.Dotted.Name") == "app.some-dotted-name--c68f55c12b"
    assert object_name("/app/Grüße") == "app.grusse--807a6c9800"
    assert object_name("/a-b/c") == "a-b.c"
    assert object_name("/a/b-c") == "a.b-c"
    assert object_name("/a--b").startswith("a-b--")  # '--' would be ambiguous: digest
    assert object_name("/___").startswith("x--")
    long = "/" + "/".join(["segment"] * 40)
    assert len(object_name(long)) <= 253 and is_dns1123_subdomain(object_name(long))


@settings(max_examples=300, deadline=None)
@given(paths)
def test_names_are_dns1123_subdomains_and_deterministic(path: str) -> None:
    name = object_name(path)
    assert is_dns1123_subdomain(name), (path, name)
    assert object_name(path) == name


@settings(max_examples=100, deadline=None)
@given(st.sets(paths, min_size=2, max_size=40))
def test_distinct_paths_get_distinct_names_and_files(many: set[str]) -> None:
    assert len({object_name(p) for p in many}) == len(many)
    files = {manifest_file(p) for p in many}
    assert len(files) == len(many)
    # A manifest file never sits where another znode's directory must go.
    directories = {PurePosixPath(*manifest_file(p).parts[:-1]) for p in many} | {
        manifest_file(p).parent / manifest_file(p).name.removesuffix(".yaml") for p in many}
    assert not files & directories


def test_manifest_files_mirror_the_tree_safely() -> None:
    assert manifest_file("/app/features/x") == PurePosixPath("app/features/x.yaml")
    assert manifest_file("/app/My Name:1") == PurePosixPath("app/My%20Name%3A1.yaml")
    assert manifest_file("/.hidden/x") == PurePosixPath("%2Ehidden/x.yaml")
    assert manifest_file("/a.yaml/b") == PurePosixPath("a%2Eyaml/b.yaml")
    assert manifest_file("/100%") == PurePosixPath("100%25.yaml")
    long = manifest_file("/" + "é" * 150)
    assert len(long.name) <= 205 and "~" in long.name


def test_dns1123_rules() -> None:
    assert is_dns1123_subdomain("a.b-c.d") and not is_dns1123_subdomain("A") and not is_dns1123_subdomain("a-")
    assert not is_dns1123_subdomain("a" * 254) and is_dns1123_subdomain("a" * 253)
    assert not is_dns1123_subdomain(".a") and not is_dns1123_subdomain("a..b")
    assert is_dns1123_label("default") and not is_dns1123_label("a.b") and not is_dns1123_label("a" * 64)
