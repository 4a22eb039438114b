"""ZooKeeperEnsembles: one installation managing ZooKeeperConfigs on several ZooKeeper ensembles.

* :mod:`.spec` -- the kind as plain data: parsing, the Secrets it names, connection options from them (pure
  but for the private files TLS and SASL need).
* :mod:`.running` -- one ensemble's session and ZooKeeperConfig controller, and :class:`~.running.Ensembles`,
  the lookup of every ensemble by name (the flags' ensemble included).
* :mod:`.controller` -- the ZooKeeperEnsemble controller (status, finalizer, rebuilds on a change of its spec
  or Secrets) and the reporter of objects whose ensemble is missing; ``setup(manager, ...)``.
* :mod:`.writer` -- the ZooKeeperEnsemble controller's finalizer and status writes, the dry-run seam.
"""
