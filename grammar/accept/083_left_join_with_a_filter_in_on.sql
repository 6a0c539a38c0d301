SELECT clinic, COUNT(*) AS visits, COUNT(dose) AS doses FROM visits LEFT JOIN prescriptions ON visits.visit_id = prescriptions.visit_id AND drug = 'x' GROUP BY clinic
