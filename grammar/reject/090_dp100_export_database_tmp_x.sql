-- expect: DP100
EXPORT DATABASE '/tmp/x'
