"""The builtin `duckdb` connector (tables of a DuckDB database file) and DuckDB helpers of the builtins."""
