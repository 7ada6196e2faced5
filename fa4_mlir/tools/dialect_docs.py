"""Print the reference documentation of the fa4 dialect (docs/dialect.md) from its declarations.

    python -m fa4_mlir.tools.dialect_docs > docs/dialect.md
"""

from __future__ import annotations

import sys


def main() -> int:
    from fa4_mlir.dialects.fa4 import DIALECT

    sys.stdout.write(DIALECT.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
