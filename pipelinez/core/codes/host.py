"""PZ07xx: Restore, connector host and executors."""

from __future__ import annotations

from pipelinez.core.codes.model import Code

CODES: tuple[Code, ...] = (
    Code(
        "PZ0701",
        "ConnectorLoadFailed",
        "a connector's entry point or code failed to load",
        "reinstall the connector package named in the message",
    ),
    Code(
        "PZ0702",
        "ManifestInvalid",
        "a connector's manifest.json is missing or malformed",
        "reinstall or upgrade the connector package",
    ),
    Code(
        "PZ0703",
        "RestoreFailed",
        "pz restore could not resolve or install a pinned connector (pip failed)",
        "check the pin in project.yml connectors: and your package index access (--index-url, "
        "--find-links, pip's own configuration)",
    ),
    Code(
        "PZ0704",
        "BuiltinPinUnsatisfied",
        "a pin names a builtin connector, and the pz installed does not ship a version that satisfies it",
        "install a pipelinez version whose builtins satisfy the pin, or change the pin",
    ),
    Code(
        "PZ0705",
        "RestoredPackageNotConnector",
        "pz restore installed the pinned package, but it provides no connector of that name in the entry "
        "point group pipelinez.connectors (or not at the pinned version)",
        "check the package name in the pin; a connector package declares "
        '[project.entry-points."pipelinez.connectors"] <name> = "module:Class"',
    ),
    Code(
        "PZ0706",
        "LockWriteFailed",
        "pz restore could not write pz.lock in the project folder",
        "make the project folder writable and run pz restore again",
    ),
    Code(
        "PZ0707",
        "RayNotInstalled",
        "`--executor ray` (or PZ_EXECUTOR=ray) was asked for, and the `ray` package cannot be imported in "
        "the Python that runs pz, or RAY_ADDRESS is a ray:// (Ray Client) address and ray[client] "
        "(grpcio) cannot be imported",
        "install the optional extra: pip install 'pipelinez[ray]' (ray[client]>=2.60,<3), or run with "
        "--executor local",
    ),
    Code(
        "PZ0708",
        "RayClusterUnavailable",
        "the Ray cluster cannot be reached or started (RAY_ADDRESS: nothing answers there within 5 "
        "seconds, or Ray's connect fails), or no node of it has the CPU and memory one pz task asks for "
        "(1 CPU and engine.memory_limit)",
        "check RAY_ADDRESS (the head node's host:6379, or ray://host:10001 for Ray Client), that the "
        "cluster runs there (`ray start --head`) and that its port is open to this machine, or unset "
        "RAY_ADDRESS for a local instance; when no node fits a task, lower engine.memory_limit to what a "
        "node offers",
    ),
    Code(
        "PZ0709",
        "RayVersionMismatch",
        "the version probe found Ray workers whose pipelinez, DuckDB or Python version differs from the "
        "driver's (the `pz` process): nodes would run with different code",
        "install the same pipelinez (and so the same DuckDB) and Python on every node of the cluster, or "
        "run the driver where the cluster's versions are installed",
    ),
    Code(
        "PZ0710",
        "WorkerLost",
        "the Ray worker or node running a node's attempt died (a node removed, the OOM killer, a crash): "
        "the attempt is transient for the node's retry policy, and never counts toward a circuit breaker",
        "nothing to do when a later attempt succeeded; if it keeps happening, check the cluster's nodes "
        "and memory (engine.memory_limit is each task's memory request), then finish the run with `pz "
        "retry`",
    ),
    Code(
        "PZ0711",
        "ExecutorSettingInvalid",
        "an executor setting cannot be used: an unknown --executor or PZ_EXECUTOR value, a malformed "
        "s3:// staging URL (--staging, PZ_STAGING_URL or engine.staging.url) or one whose scheme is not "
        "available (gs://, az://, ...), a staging folder that cannot be created or written, an s3:// "
        "staging that cannot be reached or written with project.yml's engine.staging settings (endpoint, "
        "credentials), or an engine.staging block the s3 connector's rules refuse; for the ray executor's "
        "staging and the local executor's shared staging alike, before anything runs",
        "use --executor local|ray, and for --staging / PZ_STAGING_URL / engine.staging.url a folder every "
        "node (every worker that may retry the run) can read and write (a path, or file://) or "
        "s3://bucket/prefix with its endpoint and credentials in engine.staging (docs/scale-out.md, "
        "docs/deploying.md)",
    ),
    Code(
        "PZ0712",
        "StagingPublishFailed",
        "a node's staged data could not be published on the shared staging (its Parquet files or its "
        "_manifest.json could not be written or read back): the node is not done",
        "check the staging folder's free space and permissions (an s3:// staging: the bucket's "
        "reachability and the credentials' rights) on every node; the attempt's partial files are ignored "
        "(a node is done only when its manifest exists)",
    ),
    Code(
        "PZ0713",
        "MemoryBudgetTooSmall",
        "project.yml's engine.memory_limit is below 64MB: it is the budget of all the DuckDB instances of "
        "the process together (the staging database and a DuckDB file written in its own instance split it "
        "while both are open), and DuckDB needs 32MB for each",
        "set engine.memory_limit to 64MB or more, or leave it out for the default (320MB, or a quarter of "
        "the machine's memory where that is less; docs/resilience.md, Memory)",
    ),
    Code(
        "PZ0714",
        "MemoryBudgetExhausted",
        "a node's DuckDB work needed more memory than its share of engine.memory_limit and could not spill "
        "it to the staging folder's tmp/ (DuckDB's Out of Memory error): the node failed, not the run",
        "raise engine.memory_limit in project.yml, or lower engine.threads so fewer nodes share the budget "
        "at once, then run again (docs/resilience.md, Memory)",
    ),
)
