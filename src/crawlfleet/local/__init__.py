"""``crawl`` on one machine: the coordinator (``runner``), its worker processes (``pool``) and
the records written as they arrive (``output``, ``crawl -o``)."""
