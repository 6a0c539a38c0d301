SELECT clinic, COUNT(DISTINCT cost) AS costs FROM visits GROUP BY clinic
