"""Every number the fleet shows: the worker's metrics (an observer of its events), the fleet's
metric families read from the store, the overview of a job at a glance, and the alert rules.

``metrics`` (the worker's Prometheus registry), ``fleet`` (the families ``serve`` exports from the
store), ``overview`` (what ``status`` and the dashboard show), ``alerts`` (pure rules over an
overview).
"""
