import sys

from edgeprof.cli.main import main

sys.exit(main())
