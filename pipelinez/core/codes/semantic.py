"""PZ02xx: Semantic (tier 2)."""

from __future__ import annotations

from pipelinez.core.codes.model import Code

CODES: tuple[Code, ...] = (
    Code(
        "PZ0201",
        "UndeclaredSink",
        "sink() names a sink instance that has no sinks/<name>.yml",
        "declare sinks/<name>.yml, or use one of the declared sinks",
    ),
    Code(
        "PZ0202",
        "UndeclaredSource",
        "source() names a source instance or dataset that is not declared",
        "declare the dataset under `datasets:` in sources/<source>.yml, or fix the name",
    ),
    Code(
        "PZ0203",
        "UnknownRef",
        "ref() names a pipeline that does not exist",
        "fix the name, or add pipelines/<name>.sql",
    ),
    Code(
        "PZ0204",
        "DuplicateName",
        "two pipelines share a file stem, or two project files declare the same name",
        "rename one of them; names must be unique across pipelines/ and its sub-folders",
    ),
    Code(
        "PZ0205",
        "Cycle",
        "ref() calls form a cycle",
        "break the cycle shown by removing one of the ref() calls",
    ),
    Code(
        "PZ0206",
        "OutputClaimedTwice",
        "two pipelines write to the same sink output",
        "write each output from exactly one pipeline, or give one of them a new output name",
    ),
    Code(
        "PZ0207",
        "OrphanSinkOutput",
        "retired: outputs are created by the sink() call naming them",
        "nothing to do; this code is never reused",
        retired=True,
    ),
    Code(
        "PZ0208",
        "MisplacedSink",
        "sink() appears anywhere but a leading INSERT INTO clause, or names the same output twice in one "
        "pipeline",
        "write sink() only as leading INSERT INTO {{ sink('s', 'o') }} clauses, one per output",
    ),
    Code(
        "PZ0209",
        "UndeclaredVar",
        "var() or --var names a variable not declared under `vars:`",
        "declare it under vars: in project.yml with a type and default",
    ),
    Code(
        "PZ0210",
        "InvalidVarValue",
        "a variable's default or --var value does not parse as its declared type",
        "give a value of the declared type (e.g. 2025-01-01 for date)",
    ),
    Code(
        "PZ0211",
        "UndeclaredEnv",
        "env() names an environment variable not declared under `env:`",
        "declare it under env: in project.yml (add secret: true for passwords)",
    ),
    Code(
        "PZ0212",
        "MissingEnv",
        "a required environment variable is not set and has no default",
        "export the variable before running pz, or give it a default in project.yml",
    ),
    Code(
        "PZ0213",
        "TemplateError",
        "a template cannot be rendered: Jinja syntax error, unknown function, or an operation the sandbox "
        "forbids",
        "fix the template at the place shown; available functions: source, ref, sink, watermark, var, "
        "env, env_var, the portable helpers and the project's macros",
    ),
    Code(
        "PZ0214",
        "AppendDuplicates",
        "an incremental dataset (YAML sync: or SQL watermark()) feeds an append output, through any chain "
        "of pipelines, and the output does not say `duplicates: accept`",
        "add duplicates: accept to the output, or use strategy merge with keys",
    ),
    Code(
        "PZ0215",
        "UnknownConnector",
        "a source/sink names a connector that is not installed",
        "install the connector package into the environment pz runs in, or use an installed connector",
    ),
    Code(
        "PZ0216",
        "NameCollision",
        "a pipeline's name equals a staging table name of a source load",
        "rename the pipeline; names starting with src_ are taken by source loads",
    ),
    Code(
        "PZ0217",
        "EmptyPipeline",
        "a pipeline file has no query after its sink clauses",
        "write one SELECT query after the INSERT INTO clauses",
    ),
    Code(
        "PZ0218",
        "EphemeralMisuse",
        "an ephemeral pipeline has sink clauses or checks (it never becomes a node)",
        "make it materialized: table, or move the sink clauses/checks to a consumer",
    ),
    Code(
        "PZ0219",
        "UnknownCheckTarget",
        "a relationships check's `to` names no pipeline or declared source dataset",
        "name a non-ephemeral pipeline (`orders` or `ref('orders')`), or write to: \"source('src', "
        "'dataset')\"",
    ),
    Code(
        "PZ0220",
        "ConnectorPinMismatch",
        "the installed version of a connector does not satisfy the pin in project.yml `connectors:`",
        "install a version that satisfies the pin, or change the pin",
    ),
    Code(
        "PZ0221",
        "EmptySelection",
        "retired: a selector matching nothing is the warning PZ0250, an empty selection the warning "
        "PZ0251 (as dbt: exit 0)",
        "nothing to do; this code is never reused",
        retired=True,
    ),
    Code(
        "PZ0222",
        "UnusedVar",
        "a declared variable is never used (warning)",
        "remove it from vars:, or use it with {{ var('name') }}",
    ),
    Code(
        "PZ0223",
        "DeadLeafPipeline",
        "a non-ephemeral pipeline has no INSERT INTO and is consumed by no ref() (warning)",
        "add INSERT INTO {{ sink(...) }} or a ref() consumer, or leave it while inspecting data",
    ),
    Code(
        "PZ0224",
        "UnrecognizedWatermark",
        "a watermark() call is not a recognized lower-bound comparison: an upper bound (</<=), =/!=, a "
        "function or expression on the cursor side, a column on the value side, a watermark() outside a "
        "comparison, an unqualified cursor when the query has multiple base tables, a cursor column that "
        "traces to a different dataset than the call names, or a watermark() for a dataset the pipeline "
        "never source()s",
        "rewrite as <cursor column> > / >= <expression containing {{ watermark(source, dataset) }}>, or "
        "add the missing source() call",
    ),
    Code(
        "PZ0225",
        "ConflictingIncremental",
        "a dataset is declared incremental in both YAML (sync: { mode: incremental }) and SQL "
        "(watermark()); or a watermark() targets a windowed dataset (windowed backfill is YAML-only); or "
        "two pipelines infer different cursor columns for the same dataset",
        "pick one route: YAML sync: { mode: incremental } or SQL watermark(); use YAML for windowed "
        "backfill; make every watermark() for a dataset use the same cursor column",
    ),
    Code(
        "PZ0226",
        "InconsistentIncrementalConsumers",
        "a dataset is SQL-declared incremental by at least one pipeline while another pipeline (or "
        "another read in the same one) source()s it with no recognized watermark() filter: that consumer "
        "would silently read a delta",
        "add a watermark() comparison to the non-compliant pipeline's read, or move the declaration into "
        "the dataset's YAML sync: { mode: incremental } config",
    ),
    Code(
        "PZ0227",
        "WatermarkCursorUndeclared",
        "the inferred cursor column is missing from the dataset's columns: contract or has a type outside "
        "int, bigint, decimal, date, timestamp, timestamptz",
        "add or fix the columns: entry with an allowed cursor type",
    ),
    Code(
        "PZ0228",
        "OutputTargetShared",
        "two outputs (of one or several sinks) resolve to the same physical table, file or folder (or one "
        "folder holds the other): their writes would overwrite each other",
        "give one of them another table: or path:, or write both results from one pipeline into one output",
    ),
    Code(
        "PZ0229",
        "NameCaseClash",
        "two pipelines, or a pipeline and a source dataset's staging table, or two datasets' staging "
        "tables, have names that differ only by case (P.sql and p.sql): staging (DuckDB) and "
        "case-insensitive file systems take them for one name",
        "rename one of the two so the names differ by more than case",
    ),
    Code(
        "PZ0230",
        "IncrementalSyncInvalid",
        "a dataset's sync: { mode: incremental } cannot be honoured as written: window: or lag: on a "
        "cursor that is not a date or timestamp (or whose type columns: does not declare), a window or "
        "lag on a date cursor that is not whole days, window: without start:, or a start: that is not a "
        "value of the cursor's type",
        "declare the cursor in columns: as date or timestamp, add start:, or fix the key shown",
    ),
    Code(
        "PZ0231",
        "IncrementalIntoReplace",
        "an incremental dataset (either route) feeds a replace output, through any chain of pipelines: "
        "each run would replace the whole target with the last delta (and an empty delta would fail)",
        "write the output with strategy: merge (keys:) or append, or read the dataset in full (remove its "
        "sync: incremental or its watermark() comparison)",
    ),
    Code(
        "PZ0233",
        "IncrementalNotAvailable",
        "retired: incremental reads (YAML sync: and SQL watermark()) are built; this was their stopgap",
        "nothing to do; this code is never reused",
        retired=True,
    ),
    Code(
        "PZ0234",
        "BreakerNotAvailable",
        "retired: `engine.breaker` works now (see Resilience); this warning said the block had no effect",
        "nothing to do; this code is never reused",
        retired=True,
    ),
    Code(
        "PZ0235",
        "StoredWatermarkStale",
        "the watermark .pz/state.duckdb (or the shared state backend's watermarks table) holds for an "
        "incremental dataset no longer fits it: it was "
        "committed for another cursor column (sync.cursor or the watermark() comparison changed), or its "
        "value is not a finite value of the cursor's type",
        "run `pz run --full-refresh` to read the dataset from its start and store a new watermark, or "
        "delete the dataset's row from where it is stored (the message names it)",
    ),
    Code(
        "PZ0236",
        "OutputOverlapsSource",
        "an output's folder, prefix or file is the same as, lies inside, or holds a declared source "
        "dataset's file, folder or glob folder (paths resolved against the connection root, symlinks "
        "followed; object stores: the same bucket or container): a replace would delete the source's data",
        "point the output's path: (or the sink's root/bucket) somewhere no source reads, or move the "
        "source data out of the output's folder",
    ),
    Code(
        "PZ0237",
        "OutputOverlapsProject",
        "an output's folder or file is the project folder or holds it, or is or lies inside pipelines/, "
        "sources/, sinks/, .pz/, project.yml or pz.lock: a replace would delete the project's SQL, "
        "configuration or state",
        "give the output a path: of its own (e.g. out/orders.parquet), outside those project folders",
    ),
    Code(
        "PZ0238",
        "NameReservedByDuckDB",
        "a pipeline is named like one of DuckDB's own catalog views (pg_settings, duckdb_tables, "
        "sqlite_master, ...): the staging database cannot create a table of that name",
        "rename the pipeline's file (and the ref() calls that read it)",
    ),
    Code(
        "PZ0239",
        "MacroError",
        "a macro of macros/**/*.sql failed while a pipeline or a YAML value called it (an undefined name, "
        "an error in its expressions, the sandbox's bounds)",
        "fix the macro at the file:line shown, or the arguments the calling file (named in the message) "
        "passes",
    ),
    Code(
        "PZ0240",
        "MacroRecursion",
        "macro calls nested deeper than the sandbox allows (a macro that calls itself without end)",
        "give the recursive macro a condition that stops it, or write it as a loop",
    ),
    Code(
        "PZ0241",
        "ViewReadsOutsideSink",
        "an output with `strategy: view` is written by a pipeline that reads (itself or through an "
        "ephemeral pipeline) a source dataset, a pipeline that does not write into that same sink "
        "instance, or a table named without ref() or source(): the view could not find it there",
        "read tables with ref() only, write the pipelines it reads into the same sink (ref() then names "
        "their tables there), or use a "
        "table strategy (replace, merge, append)",
    ),
    Code(
        "PZ0242",
        "ViewOptionsMisused",
        "an output with `strategy: view` sets keys, on_delete, duplicates or allow_empty (a view has no "
        "rows of its own), or its pipeline's SQL holds a secret env value (the view's definition would "
        "keep it in the target)",
        "remove those keys from the output, or pick a table strategy; keep secrets out of a view's SQL",
    ),
    Code(
        "PZ0232",
        "LockMismatch",
        "the project has a pz.lock, and a connector it pins or uses is not installed as the lock records "
        "(another package, version or origin, not installed, not recorded, or the pin changed since the "
        "lock was written)",
        "run `pz restore` to install exactly what pz.lock records (after a pin change it updates pz.lock)",
    ),
    Code(
        "PZ0245",
        "SingularTestWrites",
        "a singular test (tests/**/*.sql) calls sink() or watermark(): a test only reads",
        "remove the call; a singular test reads with source() and ref() and returns the rows that break "
        "its rule",
    ),
    Code(
        "PZ0246",
        "SingularTestEmpty",
        "a singular test (tests/**/*.sql) holds no query",
        "write a SELECT returning the rows that break the rule (no rows: the test passes)",
    ),
    Code(
        "PZ0247",
        "SingularTestName",
        "a singular test's node name chk_test__<file stem> is already the name of a check (of a pipeline "
        "named `test`)",
        "rename the test file, or give that check its own `name:`",
    ),
    Code(
        "PZ0250",
        "SelectorMatchesNothing",
        "a --select/--exclude term (or `pz show`'s pipeline) matches no node (warning, as dbt; exit 0)",
        "check the name (the message suggests a close one); `pz ls` lists every node",
    ),
    Code(
        "PZ0251",
        "NothingSelected",
        "the selection leaves no node: nothing runs, nothing is listed (warning, as dbt; exit 0)",
        "check --select and --exclude; `pz ls` lists every node",
    ),
    Code(
        "PZ0252",
        "BadSelector",
        "a --select/--exclude term can't be read: an unknown method (not source:, sink:, tag:, path:, "
        "resource_type:), a method without a value, a resource_type other than source, pipeline, check, "
        "sink, or both @ and a leading +",
        "see the selector grammar in docs/cli.md (Selection)",
    ),
    Code(
        "PZ0253",
        "NotAPipeline",
        "`pz show NAME` (or `Project.show`) names no pipeline of the project (an ephemeral pipeline is "
        "inlined, so it can't be shown on its own either)",
        "name a pipeline (`pz ls --resource-type pipeline` lists them)",
    ),
)
