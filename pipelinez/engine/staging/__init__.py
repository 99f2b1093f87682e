"""Where staged source tables live between runs and across machines: the local staging database of a run,
shared staging (Parquet under a root), and staging on object stores
for executors whose workers share no disk."""
