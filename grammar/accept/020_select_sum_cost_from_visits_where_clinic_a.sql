SELECT SUM(cost) FROM visits WHERE clinic = 'a'
