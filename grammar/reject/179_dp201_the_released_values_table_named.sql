-- expect: DP201
-- caret: __dpsql_stage_values
SELECT COUNT(*) FROM visits v, clinics c, __dpsql_stage_values WHERE v.clinic = c.clinic AND v.cost > (SELECT AVG(cost) FROM visits w WHERE w.clinic = c.clinic)
