"""The `aicf-induct` command line: one module per command group, registered in main."""
