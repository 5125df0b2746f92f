import sys

from docket.cli.app import main

sys.exit(main())
