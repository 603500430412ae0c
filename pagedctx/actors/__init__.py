"""pagedctx.actors: the Router, Worker and Consolidator roles, model backends and their Ray wiring.

Imports host, evidence, protocol and pages (DESIGN.md section 1). Only `cluster.py` and the Serve
builder touch Ray; the roles are plain classes that take a backend in their constructor.
"""
