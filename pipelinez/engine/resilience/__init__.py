"""Staying up against failing instances: per-node retries with backoff and jitter, and one circuit
breaker per source/sink instance, applied by the scheduler."""
