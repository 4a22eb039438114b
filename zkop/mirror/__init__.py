"""ZooKeeper configuration for Kubernetes workloads: ZooKeeperMirror → ConfigMap, read-only towards ZooKeeper.

==============  ==================================================================
module          role
==============  ==================================================================
``keys``        the documented znode path → ConfigMap key mapping
``tree``        watched, read-only reads of a znode or subtree
``decide``      every rule, pure: facts → one decision
``files``       atomic file sets for ``zkop fetch`` (the kubelet's ``AtomicWriter``)
``writer``      ConfigMap writes and status patches (the dry-run seam)
``reconciler``  gather → decide → apply, one mirror per key
``builder``     informers + the ``zookeeper-mirror`` controller for the manager
==============  ==================================================================
"""
