SELECT drug, COUNT(*) FROM prescriptions, visits WHERE prescriptions.visit_id = visits.visit_id AND cost > 10 GROUP BY drug
