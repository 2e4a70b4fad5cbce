"""RL trainers: advantage estimators and losses as pure functions, one short module each, and
the update loop. Built in the trainer issue."""
