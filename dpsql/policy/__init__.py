"""The data owner's policy: the model (``model``: tables, columns, links, sources), how it is loaded
and validated (``loading``), how tables reach their privacy unit (``links``), where their rows come
from (``sources``), the largest bounds it may declare (``bounds``), and SmartNoise SQL's metadata
converted into one (``smartnoise``). The names most code needs are here.

>>> p = load_policy({"budget": {"epsilon": 1.0}, "tables": {"t": {"privacy_unit": "row"}}})
>>> isinstance(p, Policy), p.tables["t"].row_level
(True, True)
"""
from dpsql.policy.loading import load_policy
from dpsql.policy.model import ColumnPolicy, Link, Policy, Source, TablePolicy

__all__ = ["load_policy", "Policy", "TablePolicy", "ColumnPolicy", "Link", "Source"]
