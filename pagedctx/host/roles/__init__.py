"""The roles of a session (P8, P9, P10, P15): router, worker and consolidator, baseline or on a model.

`baseline` (the greedy zoom Worker and the extractive Consolidator), `model_backed` (the three roles
through their modules on a model backend), `router` (addressing pages and applying its plan),
`transport` (where the router runs: this process or an actor) and `consolidation` (merging old
flow roots in the background).
"""
