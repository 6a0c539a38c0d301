"""Lowering: a Plan to engine SQL, built as a sqlglot AST (user text enters only as validated nodes):
contribution bounding, exact aggregation, noise placement, post-processing, and the quantile tree."""
