"""One module per ``python -m evaluator`` subcommand; the registry is ``evaluator.cli.COMMANDS``."""
