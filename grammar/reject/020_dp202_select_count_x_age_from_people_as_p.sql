-- expect: DP202
-- caret: x.age
SELECT COUNT(x.age) FROM people AS p
