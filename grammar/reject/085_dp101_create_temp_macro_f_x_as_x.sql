-- expect: DP101
CREATE TEMP MACRO f(x) AS x
