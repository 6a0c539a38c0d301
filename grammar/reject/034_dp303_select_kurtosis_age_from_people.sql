-- expect: DP303
SELECT KURTOSIS(age) FROM people
