"""Print the arguments exactly as received, as JSON, tagged so a test finds the line."""

import json
import sys

sys.stdout.write("ARGV " + json.dumps(sys.argv[1:]) + "\n")  # one write: lines never split
sys.stdout.flush()
