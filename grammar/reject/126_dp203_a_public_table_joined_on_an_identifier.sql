-- expect: DP203
-- caret: v.person_id = c.doctors
SELECT COUNT(*) FROM visits v JOIN clinics c ON v.person_id = c.doctors
