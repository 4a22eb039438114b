"""Settings of the service importer (``zkop run --import-services …``) and its fixed names.

One frozen :class:`ImportOptions` value is built by :func:`zkop.cmd.import_flags.options_from_args`
and handed to :func:`zkop.services.importer.builder.build_service_importer`; nothing downstream mutates it.

Ownership marks. Every object the importer creates carries all of:

* label :data:`~zkop.services.options.IMPORTED_LABEL` ``= "true"`` (the informers select on it, and
  the forward bridge never publishes a Service carrying it);
* annotation :data:`OWNER_ANNOTATION` ``= "zkop/<cluster id>"`` (which installation owns it);
* annotation :data:`PATH_ANNOTATION` (the ZooKeeper service node it was imported from);
* label ``app.kubernetes.io/managed-by: zkop``; on EndpointSlices also
  ``endpointslice.kubernetes.io/managed-by: zkop`` (so Kubernetes' EndpointSlice controllers leave
  them alone, "EndpointSlices" concept page, "Management") and ``kubernetes.io/service-name``;
* on Services the forward bridge's opt-out annotation ``platform.example.com/zookeeper-sync:
  "false"`` as a second guard against exporting them back (consul-k8s does the same with
  ``consul.hashicorp.com/service-sync: "false"``).

An object is *owned* when it has the label and this installation's owner annotation (see
:func:`zkop.services.importer.plan.is_owned`); only owned objects are ever updated or deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from zkop.services.options import DEFAULT_ROOT as BRIDGE_DEFAULT_ROOT
from zkop.services.options import IMPORTED_LABEL, MANAGED_BY

__all__ = [
    "DEFAULT_ROOTS",
    "FORMATS",
    "IMPORTED_LABEL",
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "OWNER_ANNOTATION",
    "PATH_ANNOTATION",
    "SLICE_MANAGED_BY_LABEL",
    "ImportFormat",
    "ImportOptions",
    "owner_value",
]

ImportFormat = Literal["curator", "json", "dubbo"]

#: ``--import-format`` values.
FORMATS: tuple[ImportFormat, ...] = ("curator", "json", "dubbo")
#: ``--import-root`` when not given, per format: Curator's and Spring Cloud Zookeeper's
#: ``/services``, the forward bridge's own root, Dubbo's default group ``/dubbo``.
DEFAULT_ROOTS: dict[ImportFormat, str] = {"curator": "/services", "json": BRIDGE_DEFAULT_ROOT, "dubbo": "/dubbo"}

#: Annotation naming the owning installation: ``zkop/<--cluster-id>``.
OWNER_ANNOTATION = "platform.example.com/imported-by"
#: Annotation holding the ZooKeeper path of the imported service node (e.g. ``/services/orders``).
PATH_ANNOTATION = "platform.example.com/zookeeper-path"
#: The recommended "managed by" label (value :data:`MANAGED_BY`).
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
#: EndpointSlice label telling Kubernetes' own slice controllers that someone else manages the slice.
SLICE_MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"


def owner_value(cluster_id: str) -> str:
    """The :data:`OWNER_ANNOTATION` value of installation ``cluster_id``: ``zkop/<cluster_id>``."""
    return f"{MANAGED_BY}/{cluster_id}"


@dataclass(frozen=True)
class ImportOptions:
    """Everything the importer can be told. Durations are seconds.

    Attributes:
        namespace: where Services and EndpointSlices are created (``--import-namespace``).
        format: the ZooKeeper layout read (``curator``, ``json``, ``dubbo``), see :mod:`zkop.services.importer.sources`.
        root: the znode whose children are the services (a valid absolute ZooKeeper path).
        prefix: prepended to every Service name before it is made a DNS-1035 label.
        max_deletes: a full sync that would delete the objects of more Services than this deletes
            none (the delete circuit breaker); ``0`` disables the limit.
        workers: concurrent reconciles of the ``service-import`` controller.
        gc_delay: a service that vanished from ZooKeeper triggers a full sync after this delay, so a
            burst of deletions is judged (and, if too large, refused) as one.
        ensemble: the ZooKeeperEnsemble read from (``--import-ensemble``); ``None``: the flags'.
        allowed_cidrs: ``--import-allowed-cidrs``: IP addresses outside these CIDRs are not imported (nor
            ``FQDN`` ones); empty: any address the guard does not refuse (:mod:`zkop.services.importer.guard`).
    """

    namespace: str = "default"
    format: ImportFormat = "curator"
    root: str = DEFAULT_ROOTS["curator"]
    prefix: str = ""
    max_deletes: int = 10
    workers: int = 2
    gc_delay: float = 1.0
    ensemble: str | None = None
    allowed_cidrs: tuple[str, ...] = ()
