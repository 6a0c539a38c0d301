"""The validation rules, one function each, grouped by concern; the order they run in is
``frontend.validate.VALIDATION_RULES``."""
