"""`pz docs`: the static site of a project and its runs (a viewer of its artifacts)."""
