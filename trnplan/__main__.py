import sys

from trnplan.tools.cli import main

sys.exit(main())
