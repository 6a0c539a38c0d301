WITH per_clinic (clinic_id, total) AS (SELECT clinic, SUM(cost) FROM visits GROUP BY clinic)
SELECT clinics.clinic, region, doctors, total FROM clinics, per_clinic
WHERE clinics.clinic = clinic_id AND total = (SELECT MAX(total) FROM per_clinic) ORDER BY clinics.clinic
