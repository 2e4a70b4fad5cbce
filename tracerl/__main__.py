import sys

from tracerl.cli.main import main

sys.exit(main())
