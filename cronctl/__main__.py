"""python -m cronctl"""

from cronctl.cli.main import entry

entry()
