SELECT clinic, COUNT(*) FROM visits v WHERE EXISTS (SELECT * FROM prescriptions p WHERE p.visit_id = v.visit_id AND dose > 5) GROUP BY clinic
