"""zkop: a Kubernetes operator that puts ZooKeeper under GitOps."""

__version__ = "0.1.0"
