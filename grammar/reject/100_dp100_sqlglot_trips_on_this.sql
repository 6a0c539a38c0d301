-- expect: DP100
SELECT a[ AS x
