"""zkop's CustomResourceDefinitions as package data (identical to ``manifests/crd/``)."""
