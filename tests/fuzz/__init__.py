"""Property-based fuzzing of whole projects: mutate valid project trees, run `pz`, check the invariants.

`seeds` holds the valid projects, `mutations` the hypothesis strategies that break them, `harness` runs a
case in a worker process with a time limit and classifies what `pz` printed. The CI-bounded test is
`test_fuzz_projects.py`; `benchmarks/fuzz_projects.py` runs thousands of cases and prints the outcome table.
"""
