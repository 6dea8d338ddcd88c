"""Top floor: the ``veridec`` command line, the check registry behind ``veridec verify``, experiments."""
