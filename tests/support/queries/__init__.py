"""Query generators (hypothesis strategies): ``grammar`` the grammar fuzzer, ``mutations`` mutated
accepted queries, ``typed`` queries over the leak world's typed columns."""
