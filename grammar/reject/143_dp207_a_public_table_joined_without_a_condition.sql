-- expect: DP207
-- caret: clinics
SELECT COUNT(*) FROM visits, clinics
