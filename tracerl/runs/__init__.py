"""Looking at runs: the run folders a training leaves (config.json, metrics.jsonl, run.json,
traces.db), read without changing them. :mod:`.folder` opens runs, :mod:`.episodes` reads a run's
episodes from its span store, :mod:`.diagnose` says why rewards were zero, :mod:`.server` is the
dashboard and :mod:`.report` its one-file HTML copy."""
