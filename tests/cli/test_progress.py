"""The CLI's spinner (dpsql/cli/progress.py): shown on a terminal only, never on stdout, after a second."""
import io
import time

from dpsql.cli.progress import spinner


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_spinner_shows_on_a_terminal_only():
    tty, pipe = _Terminal(), io.StringIO()
    with spinner("running the query", stream=tty, delay=0):
        time.sleep(0.3)
    with spinner("running the query", stream=pipe, delay=0):
        time.sleep(0.05)
    assert "running the query" in tty.getvalue() and pipe.getvalue() == ""


def test_the_spinner_never_takes_stdout(capsys):
    tty = _Terminal()
    with spinner("running the query", stream=tty, delay=0):
        print("the answer")
    assert capsys.readouterr().out == "the answer\n" and "the answer" not in tty.getvalue()


def test_the_spinner_waits_a_second():
    tty = _Terminal()
    with spinner("running the query", stream=tty):
        pass
    assert tty.getvalue() == ""
