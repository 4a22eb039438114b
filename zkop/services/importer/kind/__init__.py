"""ZooKeeperServiceImport: a team's own import, configured by a namespaced object instead of the ``--import-*`` flags.

==================  ==============================================================
module              role
==================  ==============================================================
``options``         :class:`~zkop.services.importer.kind.options.KindOptions` (``--service-imports``), for the registry
``spec``            pure: the spec, the selection, the owner identity and reference, the status
``reconciler``      gate → gather → the importer's own ``plan_import``/``plan_gc`` → apply → status
``builder``         informers + the ``service-imports`` controller; ``setup``
==================  ==============================================================

Everything a Service and its EndpointSlices become is decided by the flags' importer's planner
(:mod:`zkop.services.importer.plan`, :mod:`~zkop.services.importer.slices`), address guard
(:mod:`~zkop.services.importer.guard`), sources, reader and writer; this package adds what is per object:
the admission gate, the namespace, the owner.
"""
