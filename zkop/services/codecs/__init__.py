"""Wire formats of service records in ZooKeeper, each one codec that encodes *and* decodes.

==================  ================================================================
module              wire format
==================  ================================================================
``base``            owner stamps, compact JSON, the encode input (``ServiceRecord``)
                    and the decode output (``ImportedInstance``, ``Skipped``)
``json_record``     zkop's JSON service record (the original bridge script's)
``curator``         Apache Curator ``ServiceInstance`` JSON (also Spring Cloud Zookeeper)
``dubbo``           Apache Dubbo provider URLs (the URL-encoded node *name*)
``owners``          whose node is this, whatever the format (``parse_owner``)
==================  ================================================================

The bridge (:mod:`zkop.services.bridge.formats`) encodes with them, the importer
(:mod:`zkop.services.importer.sources`) decodes with them; neither knows the other.
"""
