"""The ``accelopt`` command line: optimize, profile, memory and target commands.

Modules: :mod:`.main` (parser, settings loading, dispatch), one module per command group
(:mod:`.optimize`, :mod:`.profile`, :mod:`.memory`, :mod:`.target`), :mod:`.kernel_args` (the
``PATH`` / ``--kernel`` arguments shared by optimize and profile) and :mod:`.render` (terminal
rendering with rich)."""
