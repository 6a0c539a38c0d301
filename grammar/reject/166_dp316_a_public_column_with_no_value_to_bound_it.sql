-- expect: DP316
-- caret: SUM(cost * beds)
SELECT SUM(cost * beds) FROM visits v JOIN clinics c ON v.clinic = c.clinic
