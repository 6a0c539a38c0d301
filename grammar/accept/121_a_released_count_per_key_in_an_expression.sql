SELECT COUNT(*) AS n FROM visits v, clinics c
WHERE v.clinic = c.clinic AND (v.cost * 10 < (SELECT COUNT(*) FROM visits WHERE clinic = c.clinic) OR v.cost < 3)
