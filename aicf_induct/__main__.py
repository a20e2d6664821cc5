import sys

from aicf_induct.cli.main import main

sys.exit(main())
