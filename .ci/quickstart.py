"""Print the commands of the first fenced `sh` block under the README's Quick start heading."""

import re
import sys

with open(sys.argv[1], encoding="utf-8") as readme:
    text = readme.read()
section = re.split(r"^#+\s*quick\s*start\s*$", text, maxsplit=1, flags=re.IGNORECASE | re.MULTILINE)[1]
block = re.search(r"^```sh\n(.*?)^```", section, flags=re.DOTALL | re.MULTILINE).group(1)
for line in block.splitlines():
    if line.strip() and not line.lstrip().startswith("#"):
        print(line.strip())
