-- expect: DP204
SELECT COUNT(*) FROM visits RIGHT JOIN prescriptions ON visits.visit_id = prescriptions.visit_id
