"""The path declarations shared by ZooKeeperConfigs and ZooKeeperConfigTrees are per ensemble: the same path on two
ensembles is two znodes, so declarers on different ensembles never meet (docs/operations.md "Several ensembles")."""

from __future__ import annotations

from collections.abc import Iterable

from zkop.ownership.declared import Declarer, EnsembleDeclarations


def test_declarers_on_two_ensembles_do_not_meet_and_a_removed_source_declares_nothing() -> None:
    by_ensemble = EnsembleDeclarations()
    default, second = by_ensemble.of(""), by_ensemble.of("second")
    assert by_ensemble.of("second") is second
    older, newer = Declarer(1.0, "ZooKeeperConfig", "ns/a"), Declarer(2.0, "ZooKeeperConfigTree", "ns/t")
    on_default = lambda path: [older] if path == "/shared/flag" else []  # noqa: E731
    default.add_source(on_default)
    second.add_source(lambda path: [newer] if path == "/shared/flag" else [])
    assert default.owner("/shared/flag") == older
    assert second.owner("/shared/flag") == newer  # the older one declares it on another ensemble

    heard: list[list[str]] = []

    def listener(paths: Iterable[str]) -> None:
        heard.append(list(paths))

    second.add_listener(listener)
    default.changed(["/shared/flag"])
    assert heard == []  # a change on one ensemble is not heard on another
    second.changed(["/shared/flag"])
    assert heard == [["/shared/flag"]]
    second.remove_listener(listener)
    second.changed(["/shared/flag"])
    assert heard == [["/shared/flag"]]

    default.remove_source(on_default)  # its controller went away (the ensemble's runtime made anew)
    assert default.owner("/shared/flag") is None
