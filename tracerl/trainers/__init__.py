"""RL trainers: advantage estimators and losses as pure functions, one short module each, and
the loop that runs them (``loop.train``, public as ``tracerl.train``)."""
