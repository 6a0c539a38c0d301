-- expect: DP308
SELECT MAX(age, mechanism => 'tree', mechanism => 'ptr') FROM people
