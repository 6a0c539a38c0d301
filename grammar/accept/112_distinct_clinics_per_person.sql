SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 1e-6) clinics, COUNT(*) AS people FROM (SELECT person_id, COUNT(DISTINCT clinic) AS clinics FROM visits GROUP BY person_id) AS per GROUP BY clinics
