"""ZooKeeperConfigTree: a subtree of znodes (an application's property set) from one object.

``spec`` parses and expands (pure), ``decide`` plans a pass (pure), ``reconciler`` gathers and applies through the
``writer`` (the dry-run seam), ``builder`` wires the feature (``setup(context, options)``).
"""
