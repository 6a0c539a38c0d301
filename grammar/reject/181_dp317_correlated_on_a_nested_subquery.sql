-- expect: DP317
SELECT COUNT(*) FROM visits v, clinics c WHERE v.clinic = c.clinic AND v.cost > (SELECT AVG(cost) FROM visits w WHERE w.clinic = c.clinic AND w.person_id IN (SELECT person_id FROM visits WHERE cost > 60))
