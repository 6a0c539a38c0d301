-- expect: DP317
-- caret: c.doctors
SELECT COUNT(*) FROM visits v, clinics c WHERE v.clinic = c.clinic AND v.cost > (SELECT AVG(cost) FROM visits w WHERE w.clinic = c.clinic AND w.cost < c.doctors)
