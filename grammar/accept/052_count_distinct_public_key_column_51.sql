SELECT COUNT(DISTINCT clinic) AS clinics FROM visits
