"""Tests of dpsql/cli/: the commands, their formats and exit codes, the demo."""
