-- expect: DP304
SELECT MODE(zip) FROM people
