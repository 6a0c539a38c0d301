-- expect: DP103
SELECT setseed(0.5)
