"""Looking without running: `pz ls` and `pz compile` (the matched nodes, the rendered SQL), and `pz show` /
`pz test` (a plan without sink writes run by the executor on a throwaway staging database; no lock, no run
record, no watermark)."""
