-- expect: DP101
PRAGMA database_list
