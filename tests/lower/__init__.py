"""Tests of dpsql/lower/: contribution bounding (L and C, exact sums), guards, post-processing, the
quantile tree."""
