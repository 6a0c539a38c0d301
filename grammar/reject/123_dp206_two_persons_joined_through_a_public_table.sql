-- expect: DP206
-- caret: visits v2
SELECT COUNT(*) FROM visits v1 JOIN clinics c ON v1.clinic = c.clinic JOIN visits v2 ON v2.clinic = c.clinic
