"""The Ray backend: each node attempt is a Ray task, the pz process stays the driver; reaching a Ray
cluster; and the worker side of one remote attempt."""
