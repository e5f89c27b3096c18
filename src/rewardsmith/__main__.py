"""`python -m rewardsmith` runs the command line."""

from rewardsmith.cli import main

main()
