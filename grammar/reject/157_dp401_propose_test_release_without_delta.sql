-- expect: DP401
SELECT MEDIAN(age, mechanism => 'ptr') FROM people
