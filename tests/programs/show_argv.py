"""Print the arguments exactly as received, as JSON, tagged so a test finds the line."""

import json
import sys

print("ARGV " + json.dumps(sys.argv[1:]), flush=True)
