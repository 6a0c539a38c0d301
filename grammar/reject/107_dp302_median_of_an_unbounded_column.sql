-- expect: DP302
SELECT MEDIAN(zip) FROM people
