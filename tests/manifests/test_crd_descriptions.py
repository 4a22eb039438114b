"""``kubectl explain zkc.spec`` / ``zkc.status`` say something for every field zkop defines."""

from __future__ import annotations

from typing import Any

from zkop_testing.crds import load_crd

#: Fields whose enum says all there is (kubectl explain prints the enum).
SELF_EXPLAINED = {"status.conditions[].status"}


def _undescribed(schema: dict[str, Any], where: str, *, item: bool = False) -> list[str]:
    """Paths below ``where`` without a description; an array's item object is described by its array."""
    missing = [] if item or schema.get("description") or where in SELF_EXPLAINED else [where]
    for name, child in schema.get("properties", {}).items():
        missing += _undescribed(child, f"{where}.{name}")
    if schema.get("items", {}).get("type") == "object":
        missing += _undescribed(schema["items"], f"{where}[]", item=True)
    return missing


def test_every_spec_and_status_field_has_a_description() -> None:
    for version in load_crd()["spec"]["versions"]:
        root = version["schema"]["openAPIV3Schema"]
        assert root.get("description")
        missing = [m for field in ("spec", "status") for m in _undescribed(root["properties"][field], field)]
        assert missing == [], f"{version['name']}: no description for {missing}"
