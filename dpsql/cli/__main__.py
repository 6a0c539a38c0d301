"""``python3 -m dpsql.cli``: the ``dpsql`` command, for a checkout without the installed script."""
from dpsql.cli.commands import main

if __name__ == "__main__":
    main(prog_name="dpsql")
