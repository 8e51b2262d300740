import sys

from trnplan.cli import main

sys.exit(main())
