-- expect: DP101
DROP TABLE people
