"""PZ01xx: Shape and configuration (tier 1)."""

from __future__ import annotations

from pipelinez.core.codes.model import Code

CODES: tuple[Code, ...] = (
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
    Code(
        "PZ0104",
        "MissingKey",
        "a required key is missing",
        "add the key shown in the message",
    ),
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
        "a file stem or dataset/output name is not a valid name (letters, digits, _; not starting with a "
        "digit)",
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
        "a project path is not the kind of file system entry it must be: `sources`, `sinks` or "
        "`pipelines` is a file instead of a folder, or a project file (`*.yml`, `*.sql`) is a named pipe, "
        "socket, device or folder instead of a regular file",
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
        "a project folder (pipelines/ with its sub-folders, sources/ or sinks/) holds more entries than "
        "pz walks (50,000), typically through a symbolic link to a large folder outside the project such "
        "as /tmp or a home folder; pz stopped walking there instead of reading it for minutes",
        "remove the link (or point it at a folder that holds only the project's files), and keep the "
        "project's folders free of unrelated files",
    ),
    Code(
        "PZ0118",
        "UnsafeOutputName",
        "a sink() output name is not one safe name: it is empty, holds a path separator (a slash or a "
        "backslash) or a control character, or is . or .. (it names a file, folder, object or table in "
        "every connector)",
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
        "a sidecar's `columns:` documents a column the pipeline's result does not have (a warning: the "
        "doc is shown nowhere; found when tier 4 binds the query)",
        "name one of the pipeline's result columns (the message lists them), or remove the entry",
    ),
    Code(
        "PZ0124",
        "UnknownDocBlock",
        "a `description:` calls `{{ doc('name') }}` with a name no `{% docs name %}` block of "
        "docs/**/*.md holds, or writes doc() any other way than `{{ doc('name') }}` (tier 2)",
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
        "a check or dbt-style test sets its config twice: `severity:` beside the type key and `config: "
        "{severity}`, or `config:` both beside the type key and inside its options",
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
        "a macro is named like one of pz's own template functions (source, ref, sink, watermark, var, "
        "env, env_var, doc) or portable helpers (generate_surrogate_key, date_trunc, dateadd, datediff, "
        "star, safe_cast)",
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
        "a project.yml `pipelines:` folder block sets `sink:` to a sink instance with no "
        "sinks/<name>.yml, or an ephemeral folder sets `sink:`",
        "declare the sink, fix its name, or remove `sink:` from the folder block",
    ),
    Code(
        "PZ0132",
        "StateBackendUnavailable",
        "project.yml `state.backend` names a backend this pz cannot use: no installed package registers "
        "the name (entry-point group pipelinez.state_backends)",
        "use `backend: local` (the .pz/ folder, the default), `postgres`, `s3` or `azureblob`",
    ),
    Code(
        "PZ0133",
        "StateBlockInvalid",
        "project.yml `state:` is not usable: a key the backend does not take, a connection key the postgres "
        "connector does not know, or a secret (password, dsn) written literally instead of through env()",
        "fix the `state:` block as the message says; secrets come from env vars declared `secret: true`",
    ),
    Code(
        "PZ0134",
        "StateObjectStoreBlockInvalid",
        "project.yml `state:` of an object-store backend (s3, azureblob) is not usable: `url` missing or not "
        "s3://<bucket>/<prefix> (az://<container>/<prefix>), a key the backend does not take, or a "
        "connection key the store's connector refuses (unknown, keys that go together, an endpoint's scheme)",
        "fix the `state:` block as the message says: `url:` names the bucket or container, `connection:` "
        "holds the connector's other connection keys (docs/deploying.md)",
    ),
)
