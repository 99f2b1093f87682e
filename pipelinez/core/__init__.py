"""Bottom layer: error codes, diagnostics, exceptions, durations, identifiers. Imports nothing of pz."""
