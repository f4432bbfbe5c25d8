"""The SDK's own tests: no kilnd, no root. The package is imported from this checkout."""
import sys
from pathlib import Path

SDK_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SDK_DIR))
