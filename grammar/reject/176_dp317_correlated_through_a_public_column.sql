-- expect: DP317
-- caret: d.region
SELECT COUNT(*) FROM visits v, clinics c WHERE v.clinic = c.clinic AND v.cost > (SELECT AVG(cost) FROM visits w, clinics d WHERE w.clinic = d.clinic AND d.region = c.region)
