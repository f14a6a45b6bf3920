"""The functional core: events and their codec, the state machine and fold, attention and seen
marks, routing. Pure functions and frozen values: no I/O, no clock reads, no threads. Nothing
here imports the shell (a test says so)."""
