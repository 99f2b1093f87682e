"""`pz retry`: which run it finishes, the smallest set of nodes that finishes it, and which delivery
checkpoints of the failed run its sink writes resume from."""
