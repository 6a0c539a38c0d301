-- expect: DP207
-- caret: clinics c
SELECT COUNT(*) FROM visits v, clinics c WHERE v.cost < c.doctors
