"""The on-disk plan cache (wisdom and compiled artifacts) arrives with the plan-cache issue.

In this version plans are cached in-process only (:func:`trnplan.plan.plan_many` keeps a
bounded LRU); this package reserves the name inside trnplan, per docs/architecture.md.
"""
