from anylaunch.cli import main

main()
