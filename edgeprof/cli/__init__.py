"""The command line: a thin layer over edgeprof.api (parser and exit codes in main, rendering in render)."""
