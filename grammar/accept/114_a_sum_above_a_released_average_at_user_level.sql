SELECT clinic, SUM(cost) AS total FROM visits WHERE cost > (SELECT AVG(cost) FROM visits WHERE clinic = 'a') GROUP BY clinic
