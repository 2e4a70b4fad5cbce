"""Reward functions: math answers (:mod:`.math`) and code run against tests (:mod:`.code`)."""
