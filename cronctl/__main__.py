"""python -m cronctl"""

from cronctl.cli.main import main

main()
