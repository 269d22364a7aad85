"""The command line: a thin layer over edgeprof.api. main: the entry point and exit codes;
parser: the one parser; commands: the tensor commands; llm: the generative commands; fleet:
worker, fleet, sweep; common: what they share (consoles, argument types, the kinds of model);
render / render_llm / render_listings: the terminal tables."""
