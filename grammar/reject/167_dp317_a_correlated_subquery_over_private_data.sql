-- expect: DP317
-- caret: v.clinic
SELECT COUNT(*) FROM visits v WHERE cost > (SELECT AVG(cost) FROM visits w WHERE w.clinic = v.clinic)
