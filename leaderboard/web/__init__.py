"""The website: server-rendered pages for people (rankings, reports, uploads, accounts).

One module per page family; the read-side queries live beside them (``boards``, ``reports``),
pure geometry for the SVG charts in ``charts``. Views never compute scores: they show what the
site stored from the evaluator's reports.
"""
