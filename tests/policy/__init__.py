"""Tests of dpsql/policy/: loading and validating policies, links between tables, the SmartNoise importer."""
