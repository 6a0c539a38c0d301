-- expect: DP308
SELECT MIN(age, mechanism => exponential) FROM people
