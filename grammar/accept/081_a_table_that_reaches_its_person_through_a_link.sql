SELECT drug, AVG(dose) FROM prescriptions GROUP BY drug
