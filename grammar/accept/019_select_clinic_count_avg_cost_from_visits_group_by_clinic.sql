SELECT clinic, COUNT(*), AVG(cost) FROM visits GROUP BY clinic
