SELECT COUNT(*) AS people, AVG(n, contribution_bounds_per_row => (0, 30)) AS visits
FROM (SELECT person_id, COUNT(visit_id) AS n FROM visits GROUP BY person_id) AS per
