"""`python -m pipelinez.core.codes > docs/errors.md` writes the docs page of error codes."""

from pipelinez.core.codes import render_markdown

print(render_markdown(), end="")
