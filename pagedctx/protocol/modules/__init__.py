"""pagedctx.protocol.modules: module contracts, Cognitive Modules v2.2 (M1-M5): the manifest, the folder
contract, envelopes, their schema checks and the violations they report.
"""
