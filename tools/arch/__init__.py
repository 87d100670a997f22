"""Architecture tools: the project's import graph and its function-level imports (docs/architecture.md)."""
