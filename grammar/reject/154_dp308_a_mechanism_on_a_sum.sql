-- expect: DP308
-- caret: SUM(income, mechanism => 'exponential')
SELECT SUM(income, mechanism => 'exponential') FROM people
