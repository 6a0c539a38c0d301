SELECT region, COUNT(*) AS n FROM visits v JOIN clinics c ON v.clinic = c.clinic
WHERE v.cost > (SELECT AVG(cost) FROM visits w WHERE w.clinic = c.clinic) GROUP BY region
