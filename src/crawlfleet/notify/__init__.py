"""What leaves the machine: alerts, run summaries and each run's changed records, delivered
through the store's outbox (:class:`crawlfleet.frontier.ports.Outbox`).

* :mod:`.destinations` — the endpoints of ``[notify]`` and ``[[sink]]`` (webhooks, Slack, mail,
  records sinks), each with a stable id the outbox rows name (never its URL);
* :mod:`.payloads` — the JSON of each event (a contract: its keys never change), and how Slack
  and mail show it; :mod:`.signing` — the HMAC-SHA256 signature of a body;
* :mod:`.deliver` — leases deliveries, sends them, settles them (retried with backoff, dead
  after ``tries``), exactly once per event across the fleet;
* :mod:`.keeper` — checks each running run's data profile now and then and each finished run
  once: the monitors' alerts, the run summary, the records sinks' batches.

Whoever runs with the store delivers: workers, ``serve``, ``crawl`` at its end, and
``crawlfleet notify deliver``.
"""

from __future__ import annotations
