"""The CLI tests' policy over a small table of people (user level), and a query on it; tests/cli/conftest.py
writes both to files (the ``files`` fixture)."""

POLICY = {
    "version": 1,
    "budget": {"epsilon": 10.0, "delta": 1.0e-6},
    "default_epsilon": 1.0,
    "tables": {
        "people": {
            "privacy_unit": "person_id",
            "max_groups_per_unit": 1,
            "max_rows_per_unit": 1,
            "columns": {
                "person_id": {"identifier": True},
                "ssn": {"identifier": True},
                "age": {"type": "int", "lower": 0, "upper": 100},
                "income": {"type": "float", "lower": 0, "upper": 100000},
                "sex": {"keys": ["F", "M"]},
                "zip": {},
            },
        },
    },
}

COUNT_BY_SEX = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"
