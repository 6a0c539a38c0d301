-- expect: DP308
-- caret: 'laplace'
SELECT MEDIAN(age, mechanism => 'laplace') FROM people
