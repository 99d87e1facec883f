"""``crawlfleet serve``: the web dashboard, its JSON API and Prometheus ``/metrics`` over the store.

* :mod:`~crawlfleet.control.app` — the aiohttp application and its server (and a worker's own
  ``/metrics`` server);
* :mod:`~crawlfleet.control.security` — bind, Host, token and same-origin rules;
* :mod:`~crawlfleet.control.api` — the JSON API, the changes, ``/metrics``;
* :mod:`~crawlfleet.control.views` — the pages (shells filled by ``static/dashboard.js``);
* :mod:`~crawlfleet.control.state`, :mod:`~crawlfleet.control.history` — the newest overview
  and the charts' samples; :mod:`~crawlfleet.control.raw` — raw snapshots from WARC files.

``static/`` holds the dashboard's script and style and a vendored uPlot (MIT, its licence in
``uPlot.LICENSE``): nothing is loaded from elsewhere at run time.
"""
