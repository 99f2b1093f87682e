"""Importers: turn another tool's project into a pz project (`pz import dbt`).

An importer reads the other tool's files and writes pz project files; it never runs pipelines, so it sits
above compile/config/core and below the facade (`pipelinez.api`).
"""
