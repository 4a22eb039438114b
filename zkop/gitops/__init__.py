"""GitOps adoption commands: ``zkop export``, ``diff``, ``validate`` and ``sync``."""
