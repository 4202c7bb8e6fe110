"""The application layer: every use case of ddb2bt (plan, migrate, validate, infer, demo) as a typed request and result.

The CLI, the Dataflow Flex Template launcher, the demo and the benchmarks call these functions;
nothing else assembles a run. Nothing here prints: results are values, errors are the
:mod:`ddb2bt.mappers.errors` hierarchy, progress is a callback.
"""
