"""Routes: proxy pools, sessions and the capacity planner.

``pools`` reads ``[[routes.pool]]`` and says which pools serve a request, ``sessions`` keeps
identities (cookies, user agent, route), ``planner`` computes what the pools allow. Route health
and breakers are pure policy (:mod:`crawlfleet.policy.health`).
"""
