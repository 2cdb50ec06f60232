from margin.cli import main

main()
