"""The builtin `localfiles` connector (CSV, Parquet and JSON files under a root folder)."""
