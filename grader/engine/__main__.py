"""Developer entry: ``python -m grader.engine <slug> <file> [seed]`` prints the scorecard JSON."""

import json
import sys
from pathlib import Path

from grader.catalog import load_catalog
from grader.grading import grade

if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: python -m grader.engine <slug> <file> [seed]")
    kata = load_catalog().get(sys.argv[1])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    card = grade(kata, Path(sys.argv[2]), seed=seed)
    print(json.dumps(card.to_dict(), indent=1))
    sys.exit(0 if card.passed else 1)
