SELECT v.clinic, SUM(cost * doctors) AS staffed_cost FROM visits v JOIN clinics c ON v.clinic = c.clinic GROUP BY v.clinic
