"""The command line: `dpsql query|explain|budget|demo` (click), thin over the library."""
from dpsql.cli.commands import main

__all__ = ["main"]
