"""The product's specification folder, ``shared/`` beside the checkout: the seeds (the Chinese user documentation)
and the real RLinf configs that tests read."""

from __future__ import annotations

from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"
SEEDS = SHARED / "seeds"
RLINF_CONFIGS = SHARED / "rlinf-configs"
