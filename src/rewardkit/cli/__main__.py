from rewardkit.cli import main

main()
