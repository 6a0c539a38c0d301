-- expect: DP203
-- caret: visit_id
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 1e-6) s, COUNT(*) AS people
FROM (SELECT person_id, SUM(visit_id) AS s FROM visits GROUP BY person_id) AS per GROUP BY s
