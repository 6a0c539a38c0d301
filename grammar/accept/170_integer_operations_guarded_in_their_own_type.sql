-- integer operations on both engines (issue 27): -x and ABS guarded in the column's type, // and % by a
-- literal bare, DOUBLE arithmetic and CEIL bare
SELECT COUNT(*) AS n, SUM(income * 2) AS s FROM people
WHERE -age < -10 AND abs(age - 50) < 30 AND age // 7 > 2 AND age % 7 <> 0 AND ceil(income) >= 1.5
