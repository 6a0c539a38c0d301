SELECT SUM(cost) / 7.0 AS per_week FROM visits, clinics
WHERE clinics.clinic = visits.clinic AND region = 'north' AND cost < (SELECT 0.5 * AVG(cost) FROM visits WHERE clinic = clinics.clinic)
