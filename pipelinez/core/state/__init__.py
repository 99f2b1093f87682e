"""Where pz remembers things between runs: the `StateBackend` seam, its registry and the local backend
(today's `.pz/` folder). Other backends (PostgreSQL, ...) are one class each, found by name."""
