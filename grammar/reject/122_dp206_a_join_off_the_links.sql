-- expect: DP206
-- caret: v.person_id = p.visit_id
SELECT COUNT(*) FROM visits v JOIN prescriptions p ON v.person_id = p.visit_id
