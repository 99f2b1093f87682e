"""The run model: one run of a plan (`RunSession`), the generic ready-queue scheduler, the executor that feeds
it pz nodes, the backend seam (where an attempt runs), the shared run context, and how a raised error becomes
a `NodeFailure`. Nothing here knows a connector by name."""
