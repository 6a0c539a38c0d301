-- expect: DP317
SELECT COUNT(*) FROM visits WHERE EXISTS (SELECT * FROM prescriptions WHERE prescriptions.visit_id = visits.visit_id AND dose > (SELECT AVG(dose) FROM prescriptions))
