"""A release's report (issue 26, item 5): one self-contained HTML file (inline CSS and SVG, nothing fetched,
no script) and a Markdown one, each with every statistic's table, a chart of its estimates with their
intervals, its epsilon and share of the budget, and the budget used overall; text from the spec escaped."""
from __future__ import annotations

import re
from html.parser import HTMLParser

import pyarrow as pa

import dpsql
from dpsql.publish import report
from dpsql.publish.charts import Point, svg_chart, text_chart
from tests.support.checks import edited


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of each <h2>."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.headings: list[str] = []
        self._in_h2 = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_h2 = tag == "h2"

    def handle_data(self, data):
        if self._in_h2:
            self.headings.append(data)
            self._in_h2 = False


def test_the_html_report_has_every_statistic_and_is_self_contained(tmp_path, people, spec):
    spec = edited(spec, "statistics.2.sql", "SELECT COUNT(*) AS n FROM people -- </pre><script>alert(1)</script>")
    dpsql.publish(spec, people[0], tmp_path, policy=people[1])
    text = (tmp_path / "report.html").read_text()
    found = Tags()
    found.feed(text)
    names = {t for t, _ in found.tags}
    assert found.headings == ["by_sex", "income", "total"]
    assert "script" not in names and "link" not in names and "img" not in names and "iframe" not in names
    assert not [a for _, attrs in found.tags for a in attrs if a in ("src", "href") or a.startswith("on")]
    assert not re.search(r"url\(|@import|https?://(?!www\.w3\.org/2000/svg)", text)   # nothing fetched
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert [t for t, _ in found.tags].count("svg") == 4   # n; inc and total; n: one chart per aggregate
    assert [t for t, _ in found.tags].count("table") == 3
    assert "epsilon 1 (50.0% of the budget)" in text and "epsilon 0.5 (25.0% of the budget)" in text
    assert "epsilon 2 of 2 (100.0%)" in text


def test_the_markdown_report_has_every_statistic_with_its_table_and_chart(tmp_path, people, spec):
    dpsql.publish(spec, people[0], tmp_path, policy=people[1])
    text = (tmp_path / "report.md").read_text()
    assert re.findall(r"^## (\w+)$", text, re.M) == ["by_sex", "income", "total"]
    assert text.count("| sex | n | n_ci_low | n_ci_high |") == 1 and text.count("```text") == 4
    assert "epsilon 0.5 (25.0% of the budget)" in text and text.startswith("# people\n\n3 statistics; epsilon 2 of 2")


def test_a_chart_puts_each_estimate_inside_its_interval():
    points = [Point("a", 10.0, 5.0, 15.0), Point("b", -4.0, -6.0, -2.0)]
    svg = svg_chart(points, "x")
    circles = [float(x) for x in re.findall(r'<circle cx="([\d.]+)"', svg)]
    whiskers = [(float(a), float(b)) for a, b in re.findall(r'<line x1="([\d.]+)" y1="\d+" x2="([\d.]+)" y2="\d+" '
                                                           r'class="ci"', svg)]
    assert len(circles) == len(whiskers) == 2 and all(lo < c < hi for c, (lo, hi) in zip(circles, whiskers))
    assert circles[1] < circles[0] and 'class="zero"' in svg   # 0 lies between the two
    lines = text_chart(points, width=30).splitlines()
    assert [line.index("o") for line in lines][1] < [line.index("o") for line in lines][0]
    assert all(line.index("[") < line.index("o") < line.index("]") for line in lines)


def test_a_table_without_intervals_or_numbers_still_reports(tmp_path):
    doc = {"title": "t", "status": "complete", "ci": None, "dpsql_version": "0", "policy": "p" * 64,
           "times": {"first_charge": None}, "budget": {"epsilon": 1.0, "delta": 0.0},
           "spent": {"epsilon": 1.0, "delta": 0.0},
           "statistics": [{"name": "s", "sql": "SELECT 1", "epsilon": 1.0, "delta": 0.0, "share": 1.0,
                           "columns": ["k", "v"], "outputs": [{"name": "k", "kind": "key"},
                                                              {"name": "v", "kind": "count"}]}]}
    table = pa.table({"k": ["a|b", None], "v": [None, None]})
    assert "a\\|b" in report.markdown(doc, {"s": table}) and "<svg" not in report.html(doc, {"s": table})
