SELECT clinic, SUM(cost) AS total FROM visits GROUP BY clinic ORDER BY total LIMIT 1
