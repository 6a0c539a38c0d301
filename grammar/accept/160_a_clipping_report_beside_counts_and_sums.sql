SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(report_clipping = true) clinic, COUNT(*) AS visits, SUM(cost) AS total, MEDIAN(cost) AS middle FROM visits GROUP BY clinic
