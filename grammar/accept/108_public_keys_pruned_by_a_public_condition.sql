SELECT region, COUNT(*) AS n, SUM(cost) AS total FROM visits v JOIN clinics c ON v.clinic = c.clinic WHERE doctors >= 4 GROUP BY region
