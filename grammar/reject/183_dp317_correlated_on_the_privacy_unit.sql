-- expect: DP317
-- caret: v.person_id
SELECT COUNT(*) FROM visits v, clinics c WHERE v.clinic = c.clinic AND v.cost > (SELECT AVG(cost) FROM visits w WHERE w.person_id = v.person_id)
