from crawlfleet.cli import main

main(prog_name="crawlfleet")
