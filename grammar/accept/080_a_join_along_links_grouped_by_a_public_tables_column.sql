SELECT region, COUNT(*) AS n, SUM(dose) AS total FROM prescriptions p JOIN visits v ON p.visit_id = v.visit_id JOIN clinics c ON v.clinic = c.clinic GROUP BY region
