"""The privacy properties that cut across the pipeline, checked on whole queries: leaks between
neighbouring databases (one table, joins, a heavy target under a memory limit), answers equal to
DuckDB's (differential), sensitivities, the fuzzer, and the mutants' regression tests."""
