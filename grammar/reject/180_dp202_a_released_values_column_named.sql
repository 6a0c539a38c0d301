-- expect: DP202
-- caret: __dpsql_v
SELECT COUNT(*) FROM visits v, clinics c WHERE v.clinic = c.clinic AND v.cost > (SELECT AVG(cost) FROM visits w WHERE w.clinic = c.clinic) AND __dpsql_v > 2
