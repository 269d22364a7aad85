"""Built-in backends. Each module is a plugin listed in the root ``plugins.toml`` and
registers its backend class through ``edgeprof_register_backends``; its runtime is imported
only inside ``prepare``."""
