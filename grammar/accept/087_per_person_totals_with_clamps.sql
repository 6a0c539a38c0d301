SELECT COUNT(*) AS people, AVG(spent, contribution_bounds_per_row => (0, 1000)) AS spent FROM (SELECT person_id, SUM(cost) AS spent FROM visits GROUP BY person_id) AS per
