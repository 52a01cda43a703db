from anylaunch.warm.client import main

main()
