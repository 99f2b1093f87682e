"""The error registry: every PZ code, its name, when it fires and the next step.

This table is the single source of truth: diagnostics take their next step from it and
`docs/errors.md` is generated from it (`python -m pipelinez.core.codes > docs/errors.md`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CODE_PATTERN = re.compile(r"^PZ0[1-7]\d\d$")


@dataclass(frozen=True)
class Code:
    code: str
    name: str
    when: str
    next_step: str
    retired: bool = False


_TIERS = {
    "01": "Shape and configuration (tier 1)",
    "02": "Semantic (tier 2)",
    "03": "Connectors and data-plane tiers (tier 3)",
    "04": "SQL dry-compile (tier 4)",
    "05": "Runtime",
    "06": "Connectivity (tier 5, `pz validate --connect`)",
    "07": "Restore, connector host and executors",
}

REGISTRY: tuple[Code, ...] = (
    # --- 01: shape / config -----------------------------------------------------------------
    Code(
        "PZ0101",
        "YamlSyntax",
        "a YAML file cannot be parsed (bad indentation, tabs, unclosed quote, duplicate key)",
        "fix the YAML at the line shown; a YAML linter or your editor's schema support helps",
    ),
    Code(
        "PZ0102",
        "UnknownKey",
        "a key is not part of the file's JSON Schema",
        "remove or rename the key; `pz schema` writes the schemas for editor autocomplete",
    ),
    Code(
        "PZ0103",
        "InvalidValue",
        "a value has the wrong type or is outside the allowed values",
        "change the value to one the schema allows (shown in the message)",
    ),
    Code("PZ0104", "MissingKey", "a required key is missing", "add the key shown in the message"),
    Code(
        "PZ0105",
        "ProjectNotFound",
        "no project.yml in the given folder or any folder above it",
        "run pz inside a project, pass --project DIR, or create one with `pz init`",
    ),
    Code(
        "PZ0106",
        "InvalidDuration",
        "a duration is not written as a number and a unit (500ms, 2s, 5m, 1h, 1d)",
        "write the duration like 2s or 5m",
    ),
    Code(
        "PZ0107",
        "InvalidName",
        "a file stem or dataset/output name is not a valid name (letters, digits, _; "
        "not starting with a digit)",
        "rename the file or key to a name like orders_daily",
    ),
    Code(
        "PZ0108",
        "UnreadableFile",
        "a project file cannot be read (permissions, not UTF-8, larger than 10 MiB)",
        "check the file's permissions and encoding; project files must be UTF-8 text",
    ),
    Code(
        "PZ0109",
        "OrphanSidecar",
        "a sidecar pipelines/<name>.yml has no pipelines/<name>.sql in the same folder",
        "rename the sidecar to match its pipeline's .sql file (same folder and stem), or delete it",
    ),
    Code(
        "PZ0110",
        "DanglingLink",
        "a project file or folder is a symbolic link whose target does not exist",
        "point the link at an existing file, or delete it",
    ),
    Code(
        "PZ0111",
        "SymlinkLoop",
        "symbolic links among the project's files or folders form a loop (or are too deeply chained)",
        "replace one link of the loop by a real file or folder",
    ),
    Code(
        "PZ0112",
        "OutputInputRemoved",
        "a sink output declares `input:`; load is inline in the pipeline SQL now",
        "remove `input:` and add INSERT INTO {{ sink('<sink>', '<output>') }} to the pipeline that feeds it",
    ),
    Code(
        "PZ0113",
        "InvalidCheck",
        "a sidecar/dataset check has an unknown type, a bad option shape or an unknown option key",
        "use one of the check types with its documented options (docs/project-files.md#checks)",
    ),
    Code(
        "PZ0114",
        "NotAFileOrFolder",
        "a project path is not the kind of file system entry it must be: `sources`, `sinks` or `pipelines` "
        "is a file instead of a folder, or a project file (`*.yml`, `*.sql`) is a named pipe, socket, "
        "device or folder instead of a regular file",
        "replace it with a folder (for sources/, sinks/, pipelines/) or a regular file, or move it out of "
        "the project",
    ),
    Code(
        "PZ0115",
        "ShortSecret",
        "a secret env variable's value is 3 characters long (warning; shorter is PZ0122): it is masked in "
        "messages, where it may also hide ordinary words or numbers",
        "use a longer secret",
    ),
    Code(
        "PZ0116",
        "InvalidConnectorPin",
        'a `connectors:` pin in project.yml is neither a version specifier (like ">=1.0,<2") nor a '
        'requirement naming the package (like "acme-pz>=1.0")',
        'write the pin as a PEP 440 specifier, e.g. postgres: ">=1.0,<2", or as a PEP 508 requirement',
    ),
    Code(
        "PZ0117",
        "ProjectTreeTooLarge",
        "a project folder (pipelines/ with its sub-folders, sources/ or sinks/) holds more entries than pz "
        "walks (50,000), typically through a symbolic link to a large folder outside the project such as "
        "/tmp or a home folder; pz stopped walking there instead of reading it for minutes",
        "remove the link (or point it at a folder that holds only the project's files), and keep the "
        "project's folders free of unrelated files",
    ),
    Code(
        "PZ0118",
        "UnsafeOutputName",
        "a sink() output name is not one safe name: it is empty, holds a path separator (a slash or a "
        "backslash) or a control character, or is . or .. (it names a file, folder, object or table in every "
        "connector)",
        "name the output with letters, digits and _ (like orders_2025); set its table: or path: under "
        "outputs: in the sink's file to write elsewhere",
    ),
    Code(
        "PZ0119",
        "ColumnCaseClash",
        'a pipeline\'s result or a dataset has two columns whose names differ only by case (a and "A"): '
        "DuckDB, and so staging, takes them for one name and would rename one silently in every sink",
        "give one of them another name (an AS alias in the query; the dataset's columns: contract or the "
        "file's header)",
    ),
    Code(
        "PZ0120",
        "InvalidBreaker",
        "`engine.breaker` is malformed (unknown key, non-positive failure_threshold, bad or zero cool_down)",
        "write engine.breaker as { failure_threshold: 5, cool_down: 30s }",
    ),
    Code(
        "PZ0121",
        "InvalidRetry",
        "a `retry:` block is malformed (max_attempts < 1, base_delay > max_delay)",
        "write retry as { max_attempts: 3, base_delay: 1s, max_delay: 30s }",
    ),
    Code(
        "PZ0122",
        "SecretTooShort",
        "a secret env variable's value has fewer than 3 characters: masking it would rewrite ordinary "
        "letters and digits in every message, so pz refuses it",
        "set the variable to the real secret, or declare it without `secret: true` when it is not one",
    ),
    Code(
        "PZ0123",
        "ColumnDocUnknown",
        "a sidecar's `columns:` documents a column the pipeline's result does not have (a warning: the doc "
        "is shown nowhere; found when tier 4 binds the query)",
        "name one of the pipeline's result columns (the message lists them), or remove the entry",
    ),
    Code(
        "PZ0124",
        "UnknownDocBlock",
        "a `description:` calls `{{ doc('name') }}` with a name no `{% docs name %}` block of docs/**/*.md "
        "holds, or writes doc() any other way than `{{ doc('name') }}` (tier 2)",
        "fix the name (the message suggests the nearest block), or add the block to a Markdown file under "
        "docs/",
    ),
    Code(
        "PZ0125",
        "InvalidDocBlock",
        "a `{% docs %}` block of docs/**/*.md is malformed (no or a bad name, no `{% enddocs %}`, opened "
        "inside another block, an `{% enddocs %}` closing none), or two blocks have one name (tier 2)",
        "write each block as `{% docs name %} ... {% enddocs %}` with a name used once in docs/",
    ),
    Code(
        "PZ0135",
        "CheckConfigTwice",
        "a check or dbt-style test sets its config twice: `severity:` beside the type key and "
        "`config: {severity}`, or `config:` both beside the type key and inside its options",
        "keep one of them: `config: { severity: warn }` (dbt's spelling) or `severity: warn`",
    ),
    Code(
        "PZ0136",
        "RowCountNoBound",
        "a row_count check or test sets neither min nor max (only `config:`): it could never fail",
        "add `min:` and/or `max:`, e.g. - row_count: { min: 1 }",
    ),
    Code(
        "PZ0140",
        "DbtProjectNotFound",
        "`pz import dbt DIR`: DIR holds no dbt_project.yml, or a dbt YAML file of it cannot be read or "
        "parsed",
        "name the folder that holds dbt_project.yml, and fix the file the message names",
    ),
    Code(
        "PZ0141",
        "DbtProfileNotFound",
        "`pz import dbt`: the profile dbt_project.yml names, or its target (`target:` or `--target`), is "
        "not in profiles.yml (looked up in the project folder, then $DBT_PROFILES_DIR, then ~/.dbt)",
        "add profiles.yml beside dbt_project.yml, or pass --target with a target the profile defines",
    ),
    Code(
        "PZ0142",
        "DbtAdapterUnsupported",
        "`pz import dbt`: the active target's `type:` is not duckdb or postgres",
        "import with a duckdb or postgres target (--target), or write the sink file by hand after importing",
    ),
    Code(
        "PZ0143",
        "DbtImportOutNotEmpty",
        "`pz import dbt --out DIR`: DIR is not empty and holds no earlier import (no import-report.md "
        "written by pz import dbt)",
        "choose an empty or new folder, or the folder of an earlier import (its files are then replaced)",
    ),
    Code(
        "PZ0144",
        "DbtPackageCallUnresolved",
        "a model calls a package macro (dbt_utils, dbt_date, dbt.*, adapter.dispatch, ...) or a dbt-only "
        "function pz has no equivalent for, and target/compiled/ holds no compiled SQL of the model",
        "run dbt compile first (pz import dbt then renders the model from target/compiled/), or replace "
        "the call by SQL",
    ),
    Code(
        "PZ0145",
        "DbtIncrementalNotInferred",
        "an incremental model's is_incremental() filter is not a cursor comparison pz can turn into a "
        "watermark() read (a warning: the model is imported as a full rebuild)",
        "decide how the model reads: keep the full rebuild, or write a `<column> > {{ watermark('src', "
        "'dataset') }}` filter on a source with a typed cursor column",
    ),
    Code(
        "PZ0146",
        "DbtConfigUnreadable",
        "a model's {{ config(...) }} block holds something other than literal values (a call, a variable, "
        "a Jinja expression), so the importer cannot turn it into pz settings",
        "write the config values as literals, or set them in dbt_project.yml, and import again",
    ),
    Code(
        "PZ0147",
        "DbtNameInvalid",
        "a dbt model, seed or source name is not a pz name (letters, digits and `_`, not starting with a "
        "digit), or a model and a seed (or two models) become one pz pipeline",
        "rename it in the dbt project (an `alias:` keeps the warehouse table's name) and import again",
    ),
    Code(
        "PZ0148",
        "DbtConstructSkipped",
        "a dbt construct pz has no equivalent for was met and left out of the import (a warning: unit "
        "tests, semantic models, metrics, saved queries, snapshots, exposures, analyses, Python models, "
        "hooks, an unknown test or config key); import-report.md lists each one",
        "read import-report.md and port what you need by hand",
    ),
    Code(
        "PZ0126",
        "MacroSyntax",
        "a file of macros/**/*.sql cannot be parsed as Jinja (an unclosed `{% macro %}`, a bad tag)",
        "fix the macro file at the line shown: each macro is `{% macro name(args) %} ... {% endmacro %}`",
    ),
    Code(
        "PZ0127",
        "MacroFileOutput",
        "a file of macros/**/*.sql holds something besides `{% macro %}` definitions (text, `{{ }}` or "
        "other tags outside a macro): it would never be rendered anywhere",
        "move the text into a macro, or into a pipeline; comments `{# #}` and blank lines are fine",
    ),
    Code(
        "PZ0128",
        "DuplicateMacro",
        "two `{% macro %}` definitions of macros/**/*.sql have one name",
        "rename or remove one of them (the message names both places)",
    ),
    Code(
        "PZ0129",
        "MacroShadowsPz",
        "a macro is named like one of pz's own template functions (source, ref, sink, watermark, var, env, "
        "env_var, doc) or portable helpers (generate_surrogate_key, date_trunc, dateadd, datediff, star, "
        "safe_cast)",
        "rename the macro: pz's functions cannot be replaced",
    ),
    Code(
        "PZ0130",
        "UnknownFolderConfig",
        "a key under project.yml `pipelines:` names no folder under pipelines/ (warning)",
        "fix the folder's path (relative to pipelines/, `marts/finance` for nested folders, `.` for all)",
    ),
    Code(
        "PZ0131",
        "FolderSinkUndeclared",
        "a project.yml `pipelines:` folder block sets `sink:` to a sink instance with no sinks/<name>.yml, "
        "or an ephemeral folder sets `sink:`",
        "declare the sink, fix its name, or remove `sink:` from the folder block",
    ),
    # --- 02: semantic ------------------------------------------------------------------------
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
        "sink() appears anywhere but a leading INSERT INTO clause, or names the same "
        "output twice in one pipeline",
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
        "a template cannot be rendered: Jinja syntax error, unknown function, or an "
        "operation the sandbox forbids",
        "fix the template at the place shown; available functions: source, ref, sink, watermark, var, env, "
        "env_var, the portable helpers and the project's macros",
    ),
    Code(
        "PZ0214",
        "AppendDuplicates",
        "an incremental dataset (YAML sync: or SQL watermark()) feeds an append output, through any chain of "
        "pipelines, and the output does not say `duplicates: accept`",
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
        "name a non-ephemeral pipeline (`orders` or `ref('orders')`), or write "
        "to: \"source('src', 'dataset')\"",
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
        "retired: a selector matching nothing is the warning PZ0250, an empty selection the warning PZ0251 "
        "(as dbt: exit 0)",
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
        "rewrite as <cursor column> > / >= <expression containing {{ watermark(source, dataset) }}>, or add "
        "the missing source() call",
    ),
    Code(
        "PZ0225",
        "ConflictingIncremental",
        "a dataset is declared incremental in both YAML (sync: { mode: incremental }) and SQL (watermark()); "
        "or a watermark() targets a windowed dataset (windowed backfill is YAML-only); or two pipelines "
        "infer different cursor columns for the same dataset",
        "pick one route: YAML sync: { mode: incremental } or SQL watermark(); use YAML for windowed "
        "backfill; make every watermark() for a dataset use the same cursor column",
    ),
    Code(
        "PZ0226",
        "InconsistentIncrementalConsumers",
        "a dataset is SQL-declared incremental by at least one pipeline while another pipeline (or another "
        "read in the same one) source()s it with no recognized watermark() filter: that consumer would "
        "silently read a delta",
        "add a watermark() comparison to the non-compliant pipeline's read, or move the declaration into "
        "the dataset's YAML sync: { mode: incremental } config",
    ),
    Code(
        "PZ0227",
        "WatermarkCursorUndeclared",
        "the inferred cursor column is missing from the dataset's "
        "columns: contract or has a type outside int, bigint, decimal, date, timestamp, timestamptz",
        "add or fix the columns: entry with an allowed cursor type",
    ),
    Code(
        "PZ0228",
        "OutputTargetShared",
        "two outputs (of one or several sinks) resolve to the same physical table, file or folder "
        "(or one folder holds the other): their writes would overwrite each other",
        "give one of them another table: or path:, or write both results from one pipeline into one output",
    ),
    Code(
        "PZ0229",
        "NameCaseClash",
        "two pipelines, or a pipeline and a source dataset's staging table, or two datasets' staging tables, "
        "have names that differ only by case (P.sql and p.sql): staging (DuckDB) and case-insensitive file "
        "systems take them for one name",
        "rename one of the two so the names differ by more than case",
    ),
    Code(
        "PZ0230",
        "IncrementalSyncInvalid",
        "a dataset's sync: { mode: incremental } cannot be honoured as written: window: or lag: on a cursor "
        "that is not a date or timestamp (or whose type columns: does not declare), a window or lag on a "
        "date cursor that is not whole days, window: without start:, or a start: that is not a value of the "
        "cursor's type",
        "declare the cursor in columns: as date or timestamp, add start:, or fix the key shown",
    ),
    Code(
        "PZ0231",
        "IncrementalIntoReplace",
        "an incremental dataset (either route) feeds a replace output, through any chain of pipelines: each "
        "run would replace the whole target with the last delta (and an empty delta would fail)",
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
        "the watermark .pz/state.duckdb holds for an incremental dataset no longer fits it: it was "
        "committed for another cursor column (sync.cursor or the watermark() comparison changed), or its "
        "value is not a finite value of the cursor's type",
        "run `pz run --full-refresh` to read the dataset from its start and store a new watermark, or delete "
        "the dataset's row from .pz/state.duckdb",
    ),
    Code(
        "PZ0236",
        "OutputOverlapsSource",
        "an output's folder, prefix or file is the same as, lies inside, or holds a declared source "
        "dataset's file, folder or glob folder (paths resolved against the connection root, symlinks "
        "followed; object stores: the same bucket or container): a replace would delete the source's data",
        "point the output's path: (or the sink's root/bucket) somewhere no source reads, or move the source "
        "data out of the output's folder",
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
        "ephemeral pipeline) a source dataset, or a pipeline that does not write into that same sink "
        "instance: the view could not find it there",
        "write the pipelines it reads into the same sink (ref() then names their tables there), or use a "
        "table strategy (replace, merge, append)",
    ),
    Code(
        "PZ0242",
        "ViewOptionsMisused",
        "an output with `strategy: view` sets keys, on_delete, duplicates or allow_empty (a view has no "
        "rows of its own), or its pipeline's SQL holds a secret env value (the view's definition would keep "
        "it in the target)",
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
    # --- 03: connectors and tiers ------------------------------------------------------------
    Code(
        "PZ0301",
        "InvalidConnection",
        "a `connection:` block does not match the connector's schema",
        "fix the key shown; the connector's keys are listed in docs/connectors.md",
    ),
    Code(
        "PZ0302",
        "InvalidDataset",
        "a dataset block does not match the connector's dataset schema",
        "fix the key shown; the connector's dataset keys are listed in docs/connectors.md",
    ),
    Code(
        "PZ0303",
        "InvalidOutput",
        "an output block does not match the connector's output schema",
        "fix the key shown; the connector's output keys are listed in docs/connectors.md",
    ),
    Code(
        "PZ0304",
        "ConnectorRule",
        "the connector's own validation refused a combination of settings",
        "follow the connector's message",
    ),
    Code(
        "PZ0305",
        "UnsupportedStrategy",
        "an output asks for a strategy the connector cannot do, or merge has "
        "no keys, or on_delete/duplicates is used with the wrong strategy",
        "pick a strategy the connector supports (pz plan shows capabilities); merge needs keys: [...]",
    ),
    Code(
        "PZ0306",
        "NotASource",
        "a source file names a connector that cannot read, or a sink file one that cannot write",
        "use a connector that supports this direction (docs/connectors.md)",
    ),
    Code(
        "PZ0312",
        "NativePathRequired",
        "configuration requires the universal tier on a native-only connector or "
        "format (force_universal, files_per_partition)",
        "remove engine.force_universal (or files_per_partition) for this source/sink",
    ),
    Code(
        "PZ0313",
        "WindowNotSupported",
        "a windowed dataset is read through a connector that cannot bound its native extraction",
        "remove window:, or use a connector that supports windowed reads",
    ),
    # --- 04: SQL compile ---------------------------------------------------------------------
    Code(
        "PZ0401", "SqlSyntax", "a pipeline's SQL does not parse", "fix the SQL at the line and column shown"
    ),
    Code(
        "PZ0402",
        "UnknownRelation",
        "the SQL names a table or function DuckDB cannot find",
        "read tables with {{ source('src', 'dataset') }} or {{ ref('pipeline') }}, never by raw name",
    ),
    Code(
        "PZ0403",
        "SqlBinding",
        "the SQL does not type-check (no matching function or operator, bad cast)",
        "add an explicit CAST or fix the expression at the place shown",
    ),
    Code(
        "PZ0404",
        "NotAQuery",
        "a pipeline holds more than one statement, or a statement that is not a query",
        "keep one SELECT (or WITH … SELECT) after the INSERT INTO clauses",
    ),
    Code(
        "PZ0405",
        "CheckSql",
        "a check's generated SQL does not compile (unknown column or bad expression)",
        "fix the check's columns/expression in the sidecar",
    ),
    Code(
        "PZ0406",
        "LooseCompile",
        "a dataset has no declared columns and no cached schema, so pipelines reading "
        "it were only parsed, not bound (warning)",
        "declare columns: for the dataset, or run `pz validate --connect` to cache its schema",
    ),
    Code(
        "PZ0412",
        "UnknownColumn",
        "the SQL names a column that does not exist in its input",
        "fix the column name (candidates are shown), or add it to the source's columns: contract",
    ),
    Code(
        "PZ0413",
        "ReadsOutsideInputs",
        "a pipeline's or check's SQL reads something other than its source() and ref() inputs: a table "
        "function that reads files, URLs, other databases or the catalog (read_csv, read_text, "
        "postgres_scan, query, duckdb_settings, ...), a table of another database, or a statement (ATTACH, "
        "COPY, INSTALL/LOAD, SET, PRAGMA)",
        "declare the data as a source and read it with {{ source('src', 'dataset') }}; a project that must "
        "read outside its inputs sets `engine: { external_access: true }` in project.yml",
    ),
    # --- 05: runtime -------------------------------------------------------------------------
    Code(
        "PZ0414",
        "ExtensionNotLoadable",
        "a pipeline uses a type or function of a DuckDB extension that DuckDB loads on first use (inet, "
        "spatial, excel, ...): tier 4 binds with DuckDB's external access off, so it loads no extension",
        "write the query without the extension's types and functions, or set `engine: { external_access: "
        "true }` in project.yml (it also lifts PZ0413's guard: pipelines may then read files and URLs)",
    ),
    Code(
        "PZ0501",
        "SinkWriteFailed",
        "writing an output failed",
        "fix the cause shown, then run `pz retry`: it reuses what the run staged and writes only what did "
        "not commit",
    ),
    Code("PZ0502", "NothingToRetry", "pz retry found no earlier run", "run `pz run`"),
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
        "the circuit breaker of the node's source/sink instance stayed open through 3 cool-down cycles while "
        "the node waited (retryable: the node did not run)",
        "wait for the source/sink to recover, then `pz retry` (only the failed and skipped nodes run again)",
    ),
    Code(
        "PZ0507",
        "PipelineFailed",
        "a pipeline's query failed while running in staging",
        "fix the SQL, then `pz run` (an edited pipeline is a new node, so `pz retry` will not run it); for "
        "data it trips on, fix it at the source and `pz run`, or cast or filter it in the SQL",
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
        "another pz process holds the project lock (.pz/lock)",
        "wait for the other run to finish; if it died, the stale lock is cleared automatically",
    ),
    Code("PZ0512", "InternalError", "pz hit a bug", "report it with the log file named in the message"),
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
        "the run was stopped by Ctrl-C (SIGINT) or SIGTERM (Airflow, Kubernetes, systemd): running queries "
        "interrupted, unfinished nodes cancelled, the run recorded as interrupted, the lock released",
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
        "a merge or append into an existing target has result columns the target lacks, or lacks a "
        "target column every inserted row must fill (NOT NULL without a default; every column of a parquet "
        "folder's files), the same on every connector; or, for a parquet folder, the columns come in another "
        "order than in the files already in it; nothing was written",
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
        "a run's `.pz/runs/<run_id>/run_results.json` cannot be read or is not a run record "
        "(truncated, edited by hand, not JSON)",
        "delete that run's folder under .pz/runs (its history is lost), or restore the file from a backup",
    ),
    Code(
        "PZ0518",
        "ValueOutOfStagingRange",
        "a source value lies outside what the staging database can hold (e.g. a PostgreSQL timestamp after "
        "294247-01-10); it is refused instead of being staged as a different (wrapped-around) value",
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
        "the state file .pz/state.duckdb cannot be opened or read: it is not a DuckDB database, is a folder, "
        "its write-ahead log (state.duckdb.wal) is a folder, or it lacks pz's watermarks table",
        "remove the folder named, or move the file aside (or restore it from a backup) and run "
        "`pz run --full-refresh`",
    ),
    Code(
        "PZ0528",
        "StateFileLocked",
        "another process (a DuckDB shell, a notebook) holds the lock of .pz/state.duckdb, so pz can neither "
        "read nor record committed watermarks",
        "close the program that has the file open, or open it there read-only (duckdb -readonly), then run "
        "pz again",
    ),
    Code(
        "PZ0529",
        "CursorValueNotFinite",
        "an incremental load staged a cursor value pz cannot order against a watermark (infinity, -infinity "
        "or NaN): committing it would skip every later row; the load fails and nothing is committed",
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
        "an object-store source or sink names a bucket (s3) or container (azureblob) that does not exist at "
        "the store it connects to, or the ray executor's s3:// staging URL names a bucket that does not "
        "exist (refused before the run)",
        "create the bucket or container named in the message, or fix connection.bucket/container "
        "(the --staging URL's bucket) and endpoint/region (engine.staging for the staging); pz never "
        "creates one",
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
        "edited since (its SQL, the data its connection points at, its options, a sink's keys) or removed, "
        "and a retry only finishes what that run would have done; nothing ran (exit 2)",
        "run `pz run` (or `pz run --select` the changed nodes) for a full pass with the edited project",
    ),
    Code(
        "PZ0535",
        "EventCallbackFailed",
        "the on_event callback given to the Python API's run or retry raised; it was not called again, the "
        "run went on to its end and was recorded, and EventCallbackError carries its outcome",
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
        "`pz lineage` (or `Project.lineage`) names no column of a pipeline: not of the form PIPELINE.COLUMN, "
        "no such pipeline, or the pipeline has no such result column",
        "name a pipeline and one of its result columns (the message lists them), e.g. "
        "pz lineage orders_enriched.customer",
    ),
    Code(
        "PZ0540",
        "DocsFolderTaken",
        "`pz docs generate --out DIR` names a file, or a folder holding files an earlier `pz docs generate` "
        "did not write: pz never overwrites them",
        "pass --out with an empty or new folder, or the folder of an earlier pz docs generate",
    ),
    # --- 06: connectivity --------------------------------------------------------------------
    Code(
        "PZ0601",
        "ConnectionFailed",
        "pz validate --connect could not connect to a source or sink",
        "check host, port, credentials and network access",
    ),
    Code(
        "PZ0602",
        "DatasetMissing",
        "a declared dataset does not exist at the source",
        "fix the table/path, or create it",
    ),
    Code(
        "PZ0603",
        "ColumnMissing",
        "a contract column does not exist in the live dataset",
        "update columns: to match the source, or fix the source",
    ),
    Code(
        "PZ0604",
        "ColumnTypeDrift",
        "a contract column's type differs from the live column's type",
        "update the type in columns:, or cast at the source",
    ),
    Code(
        "PZ0605",
        "ColumnUndeclared",
        "the live dataset has a column the contract does not declare (warning)",
        "add it to columns: if pipelines need it",
    ),
    Code(
        "PZ0606",
        "SinkPermission",
        "the sink permission probe could not create or replace the target",
        "grant the user create/replace rights on the target schema or folder",
    ),
    # --- 07: restore / host ------------------------------------------------------------------
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
        "the Python that runs pz, or RAY_ADDRESS is a ray:// (Ray Client) address and ray[client] (grpcio) "
        "cannot be imported",
        "install the optional extra: pip install 'pipelinez[ray]' (ray[client]>=2.60,<3), or run with "
        "--executor local",
    ),
    Code(
        "PZ0708",
        "RayClusterUnavailable",
        "the Ray cluster cannot be reached or started (RAY_ADDRESS: nothing answers there within 5 seconds, "
        "or Ray's connect fails), or no node of it has the CPU and memory one pz task asks for (1 CPU and "
        "engine.memory_limit)",
        "check RAY_ADDRESS (the head node's host:6379, or ray://host:10001 for Ray Client), that the cluster "
        "runs there (`ray start --head`) and that its port is open to this machine, or unset RAY_ADDRESS "
        "for a local instance; when no node fits a task, lower engine.memory_limit to what a node offers",
    ),
    Code(
        "PZ0709",
        "RayVersionMismatch",
        "the version probe found Ray workers whose pipelinez, DuckDB or Python version differs from the "
        "driver's (the `pz` process): nodes would run with different code",
        "install the same pipelinez (and so the same DuckDB) and Python on every node of the cluster, or run "
        "the driver where the cluster's versions are installed",
    ),
    Code(
        "PZ0710",
        "WorkerLost",
        "the Ray worker or node running a node's attempt died (a node removed, the OOM killer, a crash): the "
        "attempt is transient for the node's retry policy, and never counts toward a circuit breaker",
        "nothing to do when a later attempt succeeded; if it keeps happening, check the cluster's nodes and "
        "memory (engine.memory_limit is each task's memory request), then finish the run with `pz retry`",
    ),
    Code(
        "PZ0711",
        "ExecutorSettingInvalid",
        "an executor setting cannot be used: an unknown --executor or PZ_EXECUTOR value, --staging without "
        "the ray executor, a malformed s3:// staging URL or one whose scheme is not available (gs://, "
        "az://, ...), a staging folder that cannot be created or written, an s3:// staging that cannot be "
        "reached or written with project.yml's engine.staging settings (endpoint, credentials), or an "
        "engine.staging block the s3 connector's rules refuse",
        "use --executor local|ray, and for --staging / PZ_STAGING_URL a folder every Ray node can read and "
        "write (a path, or file://) or s3://bucket/prefix with its endpoint and credentials in "
        "engine.staging (docs/scale-out.md)",
    ),
    Code(
        "PZ0712",
        "StagingPublishFailed",
        "a node's staged data could not be published on the shared staging (its Parquet files or its "
        "_manifest.json could not be written or read back): the node is not done",
        "check the staging folder's free space and permissions (an s3:// staging: the bucket's reachability "
        "and the credentials' rights) on every node; the attempt's partial files are ignored (a node is "
        "done only when its manifest exists)",
    ),
)

BY_CODE: dict[str, Code] = {c.code: c for c in REGISTRY}


def lookup(code: str) -> Code:
    return BY_CODE[code]


def render_markdown() -> str:
    """The docs page of error codes, generated from REGISTRY."""
    lines = [
        "# Error codes",
        "",
        "Generated from `pipelinez/core/codes.py` by `python -m pipelinez.core.codes > docs/errors.md`.",
        "Every error pz prints names its code, the file/node, the cause and the next step below.",
        "",
    ]
    current = ""
    for c in REGISTRY:
        tier = c.code[2:4]
        if tier != current:
            current = tier
            lines += [
                f"## PZ{tier}xx: {_TIERS[tier]}",
                "",
                "| code | name | fires when | next step |",
                "| --- | --- | --- | --- |",
            ]
        name = f"~~{c.name}~~ (retired)" if c.retired else c.name
        lines.append(f"| {c.code} | {name} | {c.when} | {c.next_step} |")
        if c is REGISTRY[-1] or REGISTRY[REGISTRY.index(c) + 1].code[2:4] != tier:
            lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_markdown(), end="")
