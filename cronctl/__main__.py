"""python -m cronctl"""

from cronctl.cli.app import main

main()
