"""Tier 5, `pz validate --connect`: a connection check per instance and the schema fetch for datasets
without a contract."""
