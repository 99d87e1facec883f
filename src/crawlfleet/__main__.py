from crawlfleet.cli import main

main()
