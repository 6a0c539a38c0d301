"""The repository's contracts: golden files, the grammar's corpora, docs that run and stay true, the
layers, the benchmarks' harnesses, and the tests' own rules."""
