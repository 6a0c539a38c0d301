-- expect: DP207
-- caret: clinics c
SELECT COUNT(*) FROM visits v JOIN clinics c ON v.clinic = c.region
