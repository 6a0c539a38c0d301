-- expect: DP317
-- caret: AVG(cost) FROM visits w WHERE w.clinic = k.clinic
SELECT COUNT(*) FROM visits WHERE clinic IN (SELECT k.clinic FROM clinics k WHERE k.doctors * 12 > (SELECT AVG(cost) FROM visits w WHERE w.clinic = k.clinic))
