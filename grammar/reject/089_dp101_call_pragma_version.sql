-- expect: DP101
CALL pragma_version()
