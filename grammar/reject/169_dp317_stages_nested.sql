-- expect: DP317
-- caret: AVG(income) FROM people
SELECT COUNT(*) FROM people WHERE age > (SELECT AVG(age) FROM people WHERE income > (SELECT AVG(income) FROM people))
