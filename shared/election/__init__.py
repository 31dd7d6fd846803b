"""Leader election: the Elector protocol, etcd and single-node implementations."""
