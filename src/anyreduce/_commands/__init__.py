"""Sub-commands of the ``anyreduce`` command line, one module each.

Each module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``;
``anyreduce._cli`` lists them in ``COMMANDS``.
"""
