-- expect: DP101
SET threads = 1
