"""A test agent that reports usage like Claude Code's JSON result: tokens and a price.

``COST_USD`` (default 0.45) is the price it reports for every session; with ``NO_PRICE=1``
it reports tokens only. It reads the prompt from stdin and prints one result line.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    prompt = sys.stdin.read()
    result: dict[str, object] = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": f"done ({len(prompt)} characters of prompt)",
        "session_id": f"costly-{os.environ.get('OFFICE_RUN_ID', '0')}",
        "usage": {"input_tokens": 1200, "output_tokens": 80},
    }
    if os.environ.get("NO_PRICE") != "1":
        result["total_cost_usd"] = float(os.environ.get("COST_USD", "0.45"))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
