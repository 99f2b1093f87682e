"""PipelineZ: sources to sinks through SQL, validated before data moves."""

__version__ = "0.1.0"
