"""The command line: a thin layer over edgeprof.api. main: the one parser, the tensor
commands and exit codes; llm: the generative commands; fleet: worker, fleet, sweep; common:
what they share (consoles, argument types, the kinds of model); render / render_llm: the
terminal tables."""
