-- expect: DP203
-- caret: visit_id
SELECT AVG(a, contribution_bounds_per_row => (0, 2000)) AS mean_visit
FROM (SELECT person_id, AVG(visit_id) AS a FROM visits GROUP BY person_id) AS per
