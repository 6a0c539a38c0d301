-- expect: DP103
SELECT COUNT(*) FROM people WHERE current_setting('threads') = '1'
