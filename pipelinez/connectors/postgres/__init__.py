"""The builtin `postgres` connector (PostgreSQL source and sink, native and universal tiers)."""
