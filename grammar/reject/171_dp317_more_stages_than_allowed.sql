-- expect: DP317
SELECT COUNT(*) FROM people WHERE age > (SELECT AVG(age) FROM people) AND income < (SELECT AVG(income) FROM people)
AND age < (SELECT MAX(age) FROM people) AND income > (SELECT MIN(income) FROM people)
