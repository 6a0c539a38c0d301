-- expect: DP302
-- caret: SUM(CASE WHEN age > 60 THEN 'x' ELSE '0' END, contribution_bounds_per_row => (0, 1))
SELECT SUM(CASE WHEN age > 60 THEN 'x' ELSE '0' END, contribution_bounds_per_row => (0, 1)) FROM people
