"""edgeprof core: interfaces, results, plugins, errors. Nothing heavy is imported here."""
