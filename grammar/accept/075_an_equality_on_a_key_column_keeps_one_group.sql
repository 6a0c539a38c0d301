SELECT clinic, SUM(cost) AS total FROM visits WHERE clinic = 'b' GROUP BY clinic
