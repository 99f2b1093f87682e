"""What pz remembers in the project's `.pz/` folder: the folder itself, the project lock, run ids and
history with the retention sweep, and the versioned `run_results.json`
(its JSON schema lives in `schemas/`)."""
