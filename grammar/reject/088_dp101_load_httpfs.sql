-- expect: DP101
LOAD httpfs
