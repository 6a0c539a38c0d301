-- expect: DP207
-- caret: clinics c1
SELECT COUNT(*) FROM visits, clinics c1, clinics c2, clinics c3 WHERE cost > 40
