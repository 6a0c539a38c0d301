-- expect: DP102
SELECT MEDIAN(age) OVER () FROM people
