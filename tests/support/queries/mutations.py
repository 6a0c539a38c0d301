"""Mutated accepted queries: an accepted query (grammar/accept, and a few seeds of its own) after 1-5
token or character mutations, most of which keep the syntax, so that the mutants reach planning and
the engine."""
from __future__ import annotations

import re

from hypothesis import strategies as st

from tests.support.paths import ACCEPT
from tests.support.queries.grammar import (BAD_AGGREGATES, FORBIDDEN_FUNCTIONS, GOOD_AGGREGATES, HUGE_NUMBERS,
                                           SCALAR_FUNCTIONS, SPECIAL_VALUES, STRINGS)

# The accept corpus (grammar/accept, answered on the fixture database, which the fuzz database
# extends): the mutation seeds, so the mutants start from SQL that is answered.
ACCEPT_CORPUS = sorted(ACCEPT.glob("*.sql"))

# --------------------------------------------------------------------------------------------
# Mutation of accepted queries
# --------------------------------------------------------------------------------------------
EXTRA_SEEDS = [
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6, max_groups_contributed = 2, "
    "privacy_unit_column = person_id) clinic, AVG(cost, contribution_bounds_per_group => (0, 50)) AS avg_cost "
    "FROM visits GROUP BY clinic",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 0.5) COUNT(*) FROM people",
    # people is row level: its bounds are per row (per group is DP310 there, a refusal, not a seed).
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5) sex, SUM(income, "
    "contribution_bounds_per_row => (0, 100)) FROM people GROUP BY sex",
    "SELECT COUNT(*) FROM people WHERE age >= 18 AND income < 500",
    "SELECT sex, COUNT(*) AS n, SUM(age) AS s FROM people WHERE active GROUP BY sex HAVING n > 5 ORDER BY s DESC",
    "SELECT state, AVG(income) FROM people AS p WHERE p.joined >= '2020-03-01' GROUP BY 1 LIMIT 2 OFFSET 1",
]


def _seed_queries() -> list[str]:
    """EXTRA_SEEDS, then the accept corpus, each once."""
    seeds = []
    for text in EXTRA_SEEDS + [path.read_text() for path in ACCEPT_CORPUS]:
        if text.strip() and text not in seeds:
            seeds.append(text)
    return seeds


SEEDS = _seed_queries()
TOKEN = re.compile(r"""'(?:[^']|'')*'?|"(?:[^"]|"")*"?|--[^\n]*|/\*.*?\*/|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|"""
                   r"""\w+|::|=>|<>|!=|<=|>=|//|\|\||\s+|.""", re.S)
VOCABULARY = sorted(set(
    "SELECT FROM WHERE GROUP BY HAVING ORDER LIMIT OFFSET AS AND OR NOT IN BETWEEN IS NULL TRUE FALSE "
    "DISTINCT UNION ALL EXCEPT INTERSECT JOIN ON USING WITH OPTIONS DIFFERENTIAL_PRIVACY CASE WHEN THEN ELSE "
    "END CAST TRY_CAST EXISTS LIKE ILIKE ASC DESC NULLS FIRST LAST PRAGMA SET COPY ATTACH INSTALL LOAD CALL "
    "EXPORT CREATE TEMP MACRO DROP INSERT FILTER OVER PARTITION QUALIFY INTERVAL DATE RECURSIVE MATERIALIZED "
    "LATERAL TABLE VALUES COLLATE".split()) | set(
    "COUNT SUM AVG MIN MAX MEDIAN random setseed read_csv current_setting getenv now uuid nextval glob "
    "regexp_matches abs round coalesce least greatest epsilon delta max_groups_contributed privacy_unit_column "
    "contribution_bounds_per_group".split()) | set(
    "people visits ssn id person_id age income sex state zip joined active clinic cost height p v t "
    "main information_schema system".split()))
PUNCTUATION = ["(", ")", ",", ";", ".", "*", "=", "<>", "!=", "<", "<=", ">", ">=", "+", "-", "/", "//", "%",
               "||", "::", "=>", "'", '"', "--", "/*", "*/", "[", "]", "{", "}", "?", "$1", ":", "\\", "\n", "\x00"]
LITERALS = ["0", "1", "-1", "1.5", "1e-6", "''", "'F'", "'x'", "NULL", "TRUE", "9223372036854775807",
            "9223372036854775808", "1e400", "'nan'::DOUBLE", "'inf'::DOUBLE", "'2020-01-01'", "99999999999999999999"]
INSERTABLE = VOCABULARY + PUNCTUATION + LITERALS + FORBIDDEN_FUNCTIONS[:12] + [
    "WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1)", "contribution_bounds_per_group => (0, 10)",
    "(SELECT 1)", "(SELECT ssn FROM people)", "; DROP TABLE people", "JOIN visits ON TRUE", "UNION SELECT 1",
    "CAST(zip AS INT)", "age * 9223372036854775807", "age // 0", "OVER ()", "DISTINCT", "GROUP BY ssn"]
CHARS = st.one_of(st.sampled_from(list("()'\";,.*=<>!+-/%|:\\ \n\t0123456789aeEnN_$?[]{}#@`~^&")),
                  st.characters(codec="utf-8", exclude_categories=("Cs",)))


def tokenize(sql: str) -> list[str]:
    return TOKEN.findall(sql)


@st.composite
def mutated_queries(draw) -> str:
    """An accepted query after 1-5 token or character mutations."""
    tokens = tokenize(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 2, 3, 5]))):
        # ops 9-11 keep the syntax (same token class), so more mutants reach planning and the engine
        op = draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 10, 10, 11, 11]))
        n = len(tokens)
        if n == 0:
            tokens = [draw(st.sampled_from(INSERTABLE))]
            continue
        i = draw(st.integers(0, n - 1))
        if op == 0:                                  # delete a token
            del tokens[i]
        elif op == 1:                                # duplicate a token (or a run)
            j = draw(st.integers(i, min(n, i + 4)))
            tokens[j:j] = tokens[i:j] or [tokens[i]]
        elif op == 2:                                # swap two tokens
            j = draw(st.integers(0, n - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif op == 3:                                # insert a vocabulary token
            tokens[i:i] = [" ", draw(st.sampled_from(INSERTABLE)), " "]
        elif op == 4:                                # replace a token
            tokens[i] = draw(st.sampled_from(INSERTABLE))
        elif op == 5:                                # character edit inside the text
            text = "".join(tokens)
            k = draw(st.integers(0, len(text)))
            edit = draw(st.integers(0, 2))
            c = draw(CHARS)
            if edit == 0:
                text = text[:k] + c + text[k:]
            elif edit == 1:
                text = text[:k] + text[k + 1:]
            else:
                text = text[:k] + c + text[k + 1:]
            tokens = tokenize(text)
        elif op == 6:                                # change case
            style = draw(st.integers(0, 2))
            tokens[i] = [tokens[i].upper(), tokens[i].lower(), tokens[i].swapcase()][style]
            if draw(st.booleans()):
                tokens = [t.upper() if style == 0 else t.lower() if style == 1 else t.swapcase() for t in tokens]
        elif op == 7:                                # quote an identifier
            if re.fullmatch(r"\w+", tokens[i]):
                tokens[i] = f'"{tokens[i]}"' if draw(st.booleans()) else f'"{tokens[i].upper()}"'
        elif op == 9:                                # replace a literal by another (edge) literal
            spots = [k for k, t in enumerate(tokens) if re.fullmatch(r"'.*'?|\d.*", t, re.S)]
            if spots:
                tokens[draw(st.sampled_from(spots))] = draw(st.sampled_from(
                    LITERALS + HUGE_NUMBERS + SPECIAL_VALUES + STRINGS))
        elif op == 10:                               # replace an operator by another
            ops = ["=", "<>", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "//", "%", "||", "::", "AND", "OR",
                   "IS", "LIKE", "^", "&", "<<"]
            spots = [k for k, t in enumerate(tokens) if t in ops or t.upper() in ("AND", "OR")]
            if spots:
                tokens[draw(st.sampled_from(spots))] = draw(st.sampled_from(ops))
        elif op == 11:                               # replace a function name by another
            funcs = GOOD_AGGREGATES + BAD_AGGREGATES + SCALAR_FUNCTIONS + [
                "random", "setseed", "read_csv", "current_setting", "getenv", "now", "uuid", "nextval", "glob",
                "regexp_matches", "typeof", "hash", "md5", "error", "query", "list", "struct_pack"]
            spots = [k for k in range(len(tokens) - 1) if re.fullmatch(r"[A-Za-z_]\w*", tokens[k])
                     and tokens[k + 1] == "("]
            if spots:
                tokens[draw(st.sampled_from(spots))] = draw(st.sampled_from(funcs))
        else:                                        # replace an identifier by an identifier column
            names = [k for k, t in enumerate(tokens) if re.fullmatch(r"[A-Za-z_]\w*", t)
                     and t.upper() not in VOCABULARY]
            if names:
                k = draw(st.sampled_from(names))
                tokens[k] = draw(st.sampled_from(["ssn", "SSN", '"Ssn"', "id", "person_id", "p.ssn", "people.ssn",
                                                 "zip", "joined", "height"]))
    return "".join(tokens)
