"""The ``accelopt`` command line: optimize, profile, memory and target commands."""
