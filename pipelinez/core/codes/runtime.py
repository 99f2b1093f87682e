"""PZ05xx: Runtime."""

from __future__ import annotations

from pipelinez.core.codes.model import Code

CODES: tuple[Code, ...] = (
    Code(
        "PZ0501",
        "SinkWriteFailed",
        "writing an output failed",
        "fix the cause shown, then run `pz retry`: it reuses what the run staged and writes only what did "
        "not commit",
    ),
    Code(
        "PZ0502",
        "NothingToRetry",
        "pz retry found no earlier run",
        "run `pz run`",
    ),
    Code(
        "PZ0503",
        "RunInterrupted",
        "the last run was interrupted (crash or kill), so its statuses can't be trusted",
        "run `pz run` again",
    ),
    Code(
        "PZ0504",
        "OrchestratorFailed",
        "the last run failed at the orchestrator level, not at a node",
        "run `pz run` again",
    ),
    Code(
        "PZ0526",
        "RetryRecordUnreadable",
        "pz retry cannot read the last run's run_results.json (edited by hand, truncated, or written by a "
        "newer pz), so it cannot tell what that run finished",
        "run `pz run` again; `pz runs` shows the record's problem",
    ),
    Code(
        "PZ0505",
        "ExtractionFailed",
        "extracting a source dataset failed",
        "fix the cause shown at the source (its server, its file), then run `pz retry`: it extracts again "
        "only what failed (after an edit to the dataset's YAML, such as its columns: contract, `pz run`)",
    ),
    Code(
        "PZ0506",
        "BreakerOpen",
        "the circuit breaker of the node's source/sink instance stayed open through 3 cool-down cycles "
        "while the node waited (retryable: the node did not run)",
        "wait for the source/sink to recover, then `pz retry` (only the failed and skipped nodes run again)",
    ),
    Code(
        "PZ0507",
        "PipelineFailed",
        "a pipeline's query failed while running in staging",
        "fix the SQL, then `pz run` (an edited pipeline is a new node, so `pz retry` will not run it); "
        "for data it trips on, fix it at the source and `pz run`, or cast or filter it in the SQL",
    ),
    Code(
        "PZ0508",
        "CheckFailed",
        "a check with severity error found offending rows",
        "fix the data or the pipeline, or set severity: warn; sink writes of this pipeline were skipped",
    ),
    Code(
        "PZ0509",
        "EmptyReplaceRefused",
        "a replace write would empty its target because the result has no rows",
        "find out why the input is empty, or set allow_empty: true on the output",
    ),
    Code(
        "PZ0510",
        "CheckWarning",
        "a check with severity warn found offending rows (warning)",
        "look at the data; nothing was blocked",
    ),
    Code(
        "PZ0511",
        "ProjectLocked",
        "another pz process holds the project lock (.pz/lock, or the lease of the shared state backend "
        "`state:` configures, held by a process on any machine)",
        "wait for the other run to finish; if it died, the stale lock is cleared automatically (a shared "
        "backend's lease once it expires: state.lease_seconds)",
    ),
    Code(
        "PZ0512",
        "InternalError",
        "pz hit a bug",
        "report it with the log file named in the message",
    ),
    Code(
        "PZ0513",
        "UsageError",
        "the command line is malformed: unknown command or flag, bad or missing value (e.g. --threads 0), "
        'bad --var syntax; or a Python API call has an argument of the wrong type or value (threads="2", '
        'fail_fast="no", vars=[...], threads=0)',
        "see `pz <command> --help`, or docs/api.md for the Python API's arguments",
    ),
    Code(
        "PZ0514",
        "RunCancelledByUser",
        "the run was stopped by Ctrl-C (SIGINT) or SIGTERM (Airflow, Kubernetes, systemd): running "
        "queries interrupted, unfinished nodes cancelled, the run recorded as interrupted, the lock "
        "released",
        "run `pz retry` when ready to finish the run; committed sink writes stay committed",
    ),
    Code(
        "PZ0515",
        "TargetNarrowing",
        "a merge or append into an existing target (or a parquet folder an append adds to) has a result "
        "column that does not fit its target column without loss: numeric precision or scale, integer "
        "width, signedness, timestamp -> date, fractional seconds, time zone, text length; nothing was "
        "written",
        "cast the column in the pipeline as the message shows, or alter the target column to hold the "
        "result's type",
    ),
    Code(
        "PZ0516",
        "MergeDuplicateKeys",
        "a merge's result has two or more rows with the same key; nothing was written",
        "deduplicate the pipeline's result so each key appears once (e.g. QUALIFY row_number() OVER "
        "(PARTITION BY the keys ORDER BY …) = 1)",
    ),
    Code(
        "PZ0520",
        "MergeNullKey",
        "a merge's result has rows with a NULL in a key column; a NULL identifies no row, so nothing was "
        "written (the same on every connector and tier)",
        "filter those rows out (WHERE <key> IS NOT NULL) or give them a key (COALESCE) in the pipeline",
    ),
    Code(
        "PZ0517",
        "TargetColumnsDiffer",
        "a merge or append into an existing target has result columns the target lacks, or lacks a target "
        "column every inserted row must fill (NOT NULL without a default; every column of a parquet "
        "folder's files), the same on every connector; or, for a parquet folder, the columns come in "
        "another order than in the files already in it; nothing was written",
        "select the target's columns, only those (for parquet: in the same order), add the columns to the "
        "target (or give a required one a default), or write with strategy replace",
    ),
    Code(
        "PZ0524",
        "CommandNotAvailable",
        "the command is part of the reference but not available in this version of pz",
        "run `pz --help` for the commands this version has",
    ),
    Code(
        "PZ0521",
        "StateUnwritable",
        "pz cannot create or write its state folder `.pz` (a file named .pz, a read-only project folder, "
        "a full disk)",
        "make the project folder writable (or free space), or move the file named .pz out of the way",
    ),
    Code(
        "PZ0522",
        "CannotWritePath",
        "a file or folder pz was asked to write or read cannot be used (`pz init DIR`, `pz schema --out "
        "DIR`, a crash log): no permission, a file where a folder belongs, a read-only file system",
        "choose a folder you can write, or fix the permissions of the path named in the message",
    ),
    Code(
        "PZ0523",
        "CorruptRunRecord",
        "a run's `.pz/runs/<run_id>/run_results.json` cannot be read or is not a run record (truncated, "
        "edited by hand, not JSON)",
        "delete that run's folder under .pz/runs (its history is lost), or restore the file from a backup",
    ),
    Code(
        "PZ0518",
        "ValueOutOfStagingRange",
        "a source value lies outside what the staging database can hold (e.g. a PostgreSQL timestamp "
        "after 294247-01-10); it is refused instead of being staged as a different (wrapped-around) value",
        "read the dataset with a query: that filters or caps the column named in the message",
    ),
    Code(
        "PZ0519",
        "ValueNotRepresentable",
        "a result holds a value the output's file format cannot represent (NaN or Infinity in a JSON "
        "output); nothing was written rather than an invalid file",
        "map those values in the pipeline (e.g. to NULL), or write the output in a format that holds them "
        "(parquet)",
    ),
    Code(
        "PZ0525",
        "WatermarkNotRecorded",
        "every sink downstream of an incremental dataset committed, but its new watermark could not be "
        "recorded in .pz/state.duckdb (the file could not be written); the next run reads the same rows "
        "again",
        "fix what the message names (disk space, permissions, another process holding .pz/state.duckdb); "
        "merge and replace outputs absorb the re-read, an append output receives those rows twice",
    ),
    Code(
        "PZ0527",
        "StateFileUnreadable",
        "the state file .pz/state.duckdb cannot be opened or read: it is not a DuckDB database, is a "
        "folder, its write-ahead log (state.duckdb.wal) is a folder, or it lacks pz's watermarks table",
        "remove the folder named, or move the file aside (or restore it from a backup) and run `pz run "
        "--full-refresh`",
    ),
    Code(
        "PZ0528",
        "StateFileLocked",
        "another process (a DuckDB shell, a notebook) holds the lock of .pz/state.duckdb, so pz can "
        "neither read nor record committed watermarks",
        "close the program that has the file open, or open it there read-only (duckdb -readonly), then "
        "run pz again",
    ),
    Code(
        "PZ0529",
        "CursorValueNotFinite",
        "an incremental load staged a cursor value pz cannot order against a watermark (infinity, "
        "-infinity or NaN): committing it would skip every later row; the load fails and nothing is "
        "committed",
        "fix the row at the source, or read the dataset through a query: that leaves such rows out (e.g. "
        "WHERE isfinite(updated_at)) or maps them to NULL",
    ),
    Code(
        "PZ0530",
        "ForeignFilesInOutput",
        "a replace output's folder or prefix holds files pz did not write (not named in its "
        ".pz-manifest.json; without a manifest, any file not named part-*.<format>): the replace would "
        "delete them, so nothing was written",
        "move those files elsewhere or give the output a folder of its own; or set foreign_files: replace "
        "on the output to let the replace remove them",
    ),
    Code(
        "PZ0531",
        "BucketNotFound",
        "an object-store source or sink names a bucket (s3) or container (azureblob) that does not exist "
        "at the store it connects to, or the ray executor's s3:// staging URL names a bucket that does "
        "not exist (refused before the run)",
        "create the bucket or container named in the message, or fix connection.bucket/container (the "
        "--staging URL's bucket) and endpoint/region (engine.staging for the staging); pz never creates "
        "one",
    ),
    Code(
        "PZ0532",
        "OutputManifestUnreadable",
        "an output folder's .pz-manifest.json (the list of files pz wrote there) is not a manifest pz can "
        "read, so pz cannot tell its own files from others; nothing was written",
        "if every file in the folder is pz's, delete the manifest; or set foreign_files: replace on the "
        "output to let the replace remove everything there",
    ),
    Code(
        "PZ0534",
        "RetryProjectChanged",
        "pz retry found nothing of the last run it can finish: every node that run left unfinished was "
        "edited since (its SQL, the data its connection points at, its options, a sink's keys) or "
        "removed, and a retry only finishes what that run would have done; nothing ran (exit 2)",
        "run `pz run` (or `pz run --select` the changed nodes) for a full pass with the edited project",
    ),
    Code(
        "PZ0535",
        "EventCallbackFailed",
        "the on_event callback given to the Python API's run or retry raised; it was not called again, "
        "the run went on to its end and was recorded, and EventCallbackError carries its outcome",
        "fix the callback (its exception is the error's __cause__); read the run's events in events.jsonl",
    ),
    Code(
        "PZ0536",
        "HttpPageCapReached",
        "a paginated http read without max_pages reached its page cap (pagination.page_cap, default 10000 "
        "pages) while the API still named a next page: a pagination that never ends is stopped, not read "
        "forever",
        "if the API really holds that many pages, raise pagination.page_cap on the dataset; to read only "
        "the first pages on purpose, set max_pages",
    ),
    Code(
        "PZ0539",
        "LineageColumnUnknown",
        "`pz lineage` (or `Project.lineage`) names no column of a pipeline: not of the form "
        "PIPELINE.COLUMN, no such pipeline, or the pipeline has no such result column",
        "name a pipeline and one of its result columns (the message lists them), e.g. pz lineage "
        "orders_enriched.customer",
    ),
    Code(
        "PZ0540",
        "DocsFolderTaken",
        "`pz docs generate --out DIR` names a file, or a folder holding files an earlier `pz docs "
        "generate` did not write: pz never overwrites them",
        "pass --out with an empty or new folder, or the folder of an earlier pz docs generate",
    ),
    Code(
        "PZ0541",
        "RunLeaseLost",
        "a run on a shared state backend lost the project lock's lease while it ran (another run took it "
        "over after it expired, or it could not be renewed within state.lease_seconds: the backend "
        "unreachable, the process paused): the run started no node after that, so wrote no further sink, "
        "and committed no watermark; a node already under way when the loss was noticed finished",
        "check that no other run is live (pz state show), then run `pz retry` (or `pz run`): the next run "
        "reads the same delta again; raise state.lease_seconds if runs lose the backend or pause longer "
        "than it",
    ),
    Code(
        "PZ0590",
        "ObjectLeaseHeld",
        "a lease object in a shared object store (the lock of a state backend) is held by another live "
        "holder (its host, pid and run id are named, with when its lease expires)",
        "wait for that run to finish; if its holder died, the lease is taken over once it expires (no need "
        "to delete it by hand)",
    ),
    Code(
        "PZ0591",
        "ObjectLeaseLost",
        "a lease this process held was taken over by another holder, or could not be renewed before it "
        "expired (the store unreachable for a whole lease length): the process no longer holds it",
        "stop the work the lease guarded and start it again (pz retry); if the store was unreachable, fix "
        "the connection it names, or use a longer lease",
    ),
    Code(
        "PZ0592",
        "StateDocumentConflict",
        "an atomic JSON document of a shared object store (watermarks) changed under every attempt to "
        "update it: another writer kept replacing it",
        "make sure one run at a time writes this state (the lease), then run again; nothing was written",
    ),
    Code(
        "PZ0593",
        "ConditionalWritesUnsupported",
        "a lease or an atomic state document was asked of an object store that offers no conditional "
        "writes (If-None-Match, If-Match)",
        "keep shared state in an s3 or azureblob store (both offer conditional writes)",
    ),
    Code(
        "PZ0594",
        "StateObjectUnreadable",
        "a lease object or a state document in an object store is not the JSON pz wrote (written by "
        "something else, or damaged)",
        "look at the object the message names; if no run is live, delete it (pz writes it again)",
    ),
    Code(
        "PZ0580",
        "StateBackendUnreachable",
        "the shared state backend of `state:` in project.yml cannot be reached (server down, wrong host or "
        "credentials); nothing was recorded there",
        "check the server and the credentials in state.connection, then run the command again",
    ),
    Code(
        "PZ0581",
        "StateBackendRefused",
        "the shared state backend answered but refused a read or write of pz's state (no privilege on its "
        "schema or on the state url's bucket prefix, a table changed by hand), or refused a watermark "
        "commit because the run's lease was taken over by another holder (its watermarks are not "
        "committed: PZ0525)",
        "grant the role (credentials) in state.connection the right to create and write the schema named in "
        "state.schema (read, write, list and delete under state.url), then run the command again; after "
        "a lost lease, the next run re-reads the same delta",
    ),
    Code(
        "PZ0583",
        "StateStoreRootMissing",
        "the bucket or container that state.url names does not exist at the store state.connection points "
        "to (an object-store state backend); pz never creates one",
        "create the bucket or container, or fix state.url or state.connection.endpoint in project.yml",
    ),
    Code(
        "PZ0584",
        "StateStoreIgnoresConditions",
        "the object store of an object-store state backend accepted a conditional request it should have "
        "refused (If-None-Match: * on an existing object, or If-Match with an ETag the object does not have, "
        "on a write or a delete): it cannot hold the project lock or commit watermarks atomically (found by "
        "tier 5, `pz validate --connect`)",
        "use a store that honours If-None-Match and If-Match (AWS S3, Azure Blob Storage, a recent MinIO), "
        "or another state backend",
    ),
    Code(
        "PZ0582",
        "StateMigrateTarget",
        "`pz state migrate --to <backend>` names a backend other than the one project.yml's `state:` "
        "block configures (or the project keeps its state locally)",
        "set `state: {backend: <backend>, connection: {...}}` in project.yml, then run pz state migrate "
        "again",
    ),
)
