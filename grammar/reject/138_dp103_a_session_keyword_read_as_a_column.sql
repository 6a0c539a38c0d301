-- expect: DP103
-- caret: current_schema
SELECT clinic, current_schema AS s FROM clinics
