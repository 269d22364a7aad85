import sys

from edgeprof.cli import main

sys.exit(main())
