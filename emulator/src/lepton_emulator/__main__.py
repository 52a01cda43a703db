"""`python -m lepton_emulator`: the same as the `lepton-emulator` command."""

import sys

from lepton_emulator.cli import main

sys.exit(main())
