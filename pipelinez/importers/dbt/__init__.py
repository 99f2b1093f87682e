"""`pz import dbt`: a dbt project (dbt_project.yml, profiles.yml, seeds, sources, models, schema.yml tests,
macros) written as a pz project, with a report of what was converted, approximated and skipped."""

from pipelinez.importers.dbt.importer import ImportResult, import_dbt

__all__ = ["ImportResult", "import_dbt"]
