SELECT clinic, COUNT(DISTINCT person_id) AS people FROM visits GROUP BY clinic
