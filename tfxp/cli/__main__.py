"""`python -m tfxp.cli ARGS` = `tfxp ARGS`."""

from tfxp.cli import exit_now, guarded_main

exit_now(guarded_main())
