"""`python -m rewardsmith` runs the command line (with the `rewardsmith` command's thread settings)."""

from rewardsmith.launch import main

main()
