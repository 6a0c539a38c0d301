-- expect: DP101
INSTALL httpfs
