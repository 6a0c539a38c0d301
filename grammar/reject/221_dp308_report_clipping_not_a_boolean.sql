-- expect: DP308
-- caret: 'yes'
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(report_clipping = 'yes') clinic, COUNT(*) FROM visits GROUP BY clinic
